"""How far a turn may go: the autonomy levels and the one table they derive from.

Three levels (seeds/000 and the issue 20 brief): ``read_only`` only looks,
``supervised`` (the default) is today's behaviour, ``full`` spares the user
the question for what undo can put back. Everything a level changes is read
from :data:`POLICY`, so the sandbox profile and the approval rule cannot
disagree about what a level means.

What a level never changes: the signature check, the policy check of the
arguments and the sandbox itself. ``full`` only waives the *question* for a
side effect undo can reverse (files inside the executor's write grants, no
network, nothing sent); a message sent or a request posted still asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metnos.errors import MetnosError
from metnos.sandbox.profile import SandboxProfile

READ_ONLY = "read_only"
SUPERVISED = "supervised"
FULL = "full"
DEFAULT = SUPERVISED

# How users may spell a level (config.toml, --autonomy).
_SPELLINGS = {
    "read_only": READ_ONLY, "readonly": READ_ONLY, "read-only": READ_ONLY,
    "supervised": SUPERVISED,
    "full": FULL,
}


@dataclass(frozen=True)
class LevelRule:
    # Every grant mounted read-only: the kernel refuses a write whatever the executor declares.
    mounts_read_only: bool
    # An executor (or builtin) that declares side effects is never offered nor run.
    offers_side_effects: bool
    # The vaglio's "ask" is answered by the level for side effects undo can reverse.
    waives_reversible_approval: bool


POLICY: dict[str, LevelRule] = {
    READ_ONLY: LevelRule(mounts_read_only=True, offers_side_effects=False, waives_reversible_approval=False),
    SUPERVISED: LevelRule(mounts_read_only=False, offers_side_effects=True, waives_reversible_approval=False),
    FULL: LevelRule(mounts_read_only=False, offers_side_effects=True, waives_reversible_approval=True),
}


class AutonomyError(MetnosError):
    """An autonomy level that is not one of the three."""


def parse_level(value: Any, *, source: str = "--autonomy") -> str:
    if isinstance(value, str) and value.strip().lower() in _SPELLINGS:
        return _SPELLINGS[value.strip().lower()]
    msg = f"{source}: {value!r} is not an autonomy level (read_only, supervised or full)"
    raise AutonomyError(msg)


def rule(level: str) -> LevelRule:
    return POLICY[parse_level(level)]


def sandbox_profile(level: str, profile: SandboxProfile) -> SandboxProfile:
    """The profile an invocation runs under at ``level``: under read_only every
    write grant becomes a read grant, so nothing is bound writable."""
    if not rule(level).mounts_read_only or not profile.fs_write:
        return profile
    reads = tuple(dict.fromkeys((*profile.fs_read, *profile.fs_write)))
    return profile.model_copy(update={"fs_read": reads, "fs_write": ()})


def offers(level: str, *, side_effects: bool) -> bool:
    """Whether a tool with (or without) side effects may be offered and run at ``level``."""
    return rule(level).offers_side_effects or not side_effects


def refusal(level: str, name: str) -> dict[str, Any]:
    """The observation for a call the level refuses (the model asked for it by name)."""
    return {"ok": False, "error_class": "autonomy_read_only",
            "error": f"{name} changes things and this turn runs read-only (autonomy {level}): it was not run",
            "hint": "only look: use executors that read, or tell the user what you would change"}


def reversible(profile: SandboxProfile, *, side_effects: bool) -> bool:
    """Whether undo can put back what a call does: its effects are files in its
    write grants (kept as before-images), and it can reach no host and holds no
    secret through which something could leave the machine."""
    if not side_effects:
        return True
    return bool(profile.fs_write) and not profile.network_hosts and not profile.env


def waives_approval(level: str, profile: SandboxProfile | None, *, side_effects: bool) -> bool:
    """Whether the level answers the vaglio's question itself (only ``full``,
    only for what undo reverses; a builtin, with no profile, always asks)."""
    return rule(level).waives_reversible_approval and profile is not None and reversible(profile, side_effects=side_effects)
