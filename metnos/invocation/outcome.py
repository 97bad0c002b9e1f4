"""What one invocation came to: the object the turn loop records."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class InvocationOutcome:
    ok: bool
    # None when ok; otherwise a FailureKind value ("Timeout", "Crash", ...).
    kind: str | None
    output: dict[str, Any] | None
    exit_code: int | None
    duration_ms: int
    stderr_tail: str
    # blake3 hex of the raw stdout bytes (None when nothing was read).
    output_sha: str | None
    output_bytes: int
    # Structured detail of the failure: for PolicyViolation argument/rule/
    # detail, for SchemaViolation where/path/message, for Crash the error
    # type and message the host reported, for Timeout which clock ran out.
    error: dict[str, Any] = field(default_factory=dict)
    # Which layers were in force: ("policy", "bwrap", "seccomp", "landlock",
    # "pids-cgroup") or just ("policy",) in fallback.
    layers: tuple[str, ...] = ()
    sandbox_mode: str = ""
    # Every connection the egress proxy saw: host, port, method, allowed, reason.
    network: tuple[dict[str, Any], ...] = ()

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict for the event log."""
        d = asdict(self)
        d["layers"] = list(self.layers)
        d["network"] = list(self.network)
        return d
