"""What one invocation came to: the object the turn loop records."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# How much of a failed executor's stderr the model and `turns show` see: the
# end of a traceback names the cause; more would flood the model's context.
STDERR_TAIL_BYTES = 2048


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
    # "bwrap", "off" (METNOS_SANDBOX=off) or "unavailable" (refused).
    sandbox_mode: str = ""
    # Every connection the egress proxy saw: host, port, method, allowed, reason.
    network: tuple[dict[str, Any], ...] = ()

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict for the event log."""
        d = asdict(self)
        d["layers"] = list(self.layers)
        d["network"] = list(self.network)
        return d


def stderr_excerpt(stderr_tail: str, limit: int = STDERR_TAIL_BYTES) -> str:
    """The last ``limit`` bytes of ``stderr_tail`` (UTF-8), whole characters only."""
    data = stderr_tail.encode("utf-8", "replace")
    if len(data) <= limit:
        return stderr_tail
    return data[-limit:].decode("utf-8", "ignore")


def failure_observation(kind: str | None, error: dict[str, Any] | None, stderr_tail: str = "") -> dict[str, Any]:
    """What the planner sees of a failed invocation: the kind, the structured
    error, and the end of stderr, so the model can correct itself. Live calls
    and replay build it here, from the same recorded parts."""
    observation: dict[str, Any] = {"ok": False, "error": {"kind": kind, **(error or {})}}
    tail = stderr_excerpt(stderr_tail).strip()
    if tail:
        observation["stderr_tail"] = tail
    return observation
