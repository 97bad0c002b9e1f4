"""The effective sandbox profile of an executor, and its lock digest.

The profile is what the manifest's capabilities and caps amount to once
resolved; ``profile.lock`` freezes its blake3 digest at signing time so that
a silent widening is caught before any spawn (seeds/000 ch. 3 and 5).
"""

from __future__ import annotations

import blake3
import orjson
from pydantic import BaseModel, ConfigDict, Field

PROFILE_FORMAT = 1


class SandboxProfile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Path hints as written in the manifest ("~/notes", "$WORKSPACE/inbox",
    # "/srv/data"); resolved against the user's home at spawn time.
    fs_read: tuple[str, ...] = ()
    fs_write: tuple[str, ...] = ()
    # Hosts the executor may reach; empty means no network at all.
    network_hosts: tuple[str, ...] = ()
    # Binaries it may exec besides its own interpreter.
    binaries: tuple[str, ...] = ()
    time_read: bool = False
    # Put the runtime's installed packages (read-only) on the executor's
    # sys.path, for the few executors that import a library such as httpx.
    # Off by default: an executor is stdlib-only unless it says otherwise.
    site_packages: bool = False
    # Extra environment variable names passed through --clearenv.
    env: tuple[str, ...] = ()
    max_duration_s: float = Field(default=10.0, gt=0, le=3600)
    max_cpu_s: float | None = Field(default=None, gt=0)
    max_memory_mb: int = Field(default=256, gt=0, le=65536)
    max_output_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    max_pids: int = Field(default=16, gt=0, le=4096)

    @property
    def wants_network(self) -> bool:
        return bool(self.network_hosts)

    def canonical_bytes(self) -> bytes:
        body = {"format": PROFILE_FORMAT, **self.model_dump(mode="json")}
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)

    def lock_digest(self) -> str:
        """The text written to profile.lock: ``blake3:<hex>``."""
        return "blake3:" + blake3.blake3(self.canonical_bytes()).hexdigest()
