"""``[actors]`` in config.toml: what the host and the guests may do (seeds/002 ch. 11.2.4).

```toml
[actors.host]
autonomy = "supervised"   # unset: [runtime] autonomy (or ask --autonomy)
max_schedules = 100       # schedules this actor may keep open (active or paused)

[actors.guest]            # every guest_<id>
autonomy = "read_only"    # read_only | supervised | full
max_schedules = 3
approvals = []            # executors a guest may approve on its own channel; empty: none
```

A guest's approval never widens its autonomy: at ``read_only`` a call with side
effects is refused before anyone is asked, whatever ``approvals`` lists.

The level is checked strictly: a value that is not one of the three names is
refused when the file is read, naming the key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from metnos.settings.declare import setting

Level = Literal["read_only", "supervised", "full"]


class HostPolicy(BaseModel):
    """``[actors.host]``: the first paired chat or device."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    autonomy: Level | None = setting(None, "The host's autonomy level; unset, [runtime] autonomy (or ask --autonomy) decides.")
    max_schedules: int = setting(100, "How many open (active or paused) schedules the host may keep.", ge=0)


class GuestPolicy(BaseModel):
    """``[actors.guest]``: every chat or device paired after the host (guest_<id>)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    autonomy: Level = setting("read_only", "A guest's autonomy level: read_only, supervised or full.")
    max_schedules: int = setting(3, "How many open (active or paused) schedules each guest may keep.", ge=0)
    approvals: tuple[str, ...] = setting((), "Executors a guest may approve on its own channel (a call that would ask the host "
                                             "asks the guest); empty: none, its questions are answered no. Never widens the "
                                             "guest's autonomy: at read_only nothing with side effects is asked.", strict=False)


class ActorsConfig(BaseModel):
    """``[actors]``: per-actor autonomy and quotas."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: HostPolicy = Field(default_factory=HostPolicy)
    guest: GuestPolicy = Field(default_factory=GuestPolicy)

    def autonomy_of(self, actor: str, level: str) -> str:
        """The level a turn of ``actor`` runs at; ``level`` is the one asked for (config or flag)."""
        if actor == "host":
            return self.host.autonomy or level
        return self.guest.autonomy

    def approvals_of(self, actor: str) -> tuple[str, ...]:
        """The executors ``actor`` may approve as a guest: ``[actors.guest] approvals``; nothing to say for the host,
        who approves what the vaglio asks."""
        return () if actor == "host" else self.guest.approvals

    def max_schedules_of(self, actor: str) -> tuple[int, str]:
        """The quota on ``actor``'s open schedules and the setting that decides it."""
        if actor == "host":
            return self.host.max_schedules, "[actors.host] max_schedules"
        return self.guest.max_schedules, "[actors.guest] max_schedules"
