"""The structured ways an invocation can fail.

Every failure of an invocation ends as one of these kinds inside an
InvocationOutcome, never as a traceback reaching the caller. The exceptions
below are how the checks that run before a spawn report themselves; the
runner turns them into outcomes.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from domain.errors import MetnosError


class FailureKind(str, Enum):
    POLICY_VIOLATION = "PolicyViolation"
    SCHEMA_VIOLATION = "SchemaViolation"
    TIMEOUT = "Timeout"
    TOO_LARGE = "TooLarge"
    # The invocation's processes together passed the memory cap.
    MEMORY_EXCEEDED = "MemoryExceeded"
    NON_JSON_OUTPUT = "NonJSONOutput"
    CRASH = "Crash"
    NETWORK_DENIED = "NetworkDenied"
    SANDBOX_UNAVAILABLE = "SandboxUnavailable"


class InvocationError(Exception):
    kind: FailureKind

    def details(self) -> dict[str, Any]:
        return {"message": str(self)}


class PolicyViolation(InvocationError):
    """An argument (or the profile itself) falls outside the declared scope.

    ``argument`` is the JSON-pointer-ish location of the offending value in
    the arguments (``/paths/2``), or ``profile`` when the profile is at fault;
    ``rule`` is a short stable name (``outside-grant``, ``nul-byte``, ...).
    """

    kind = FailureKind.POLICY_VIOLATION

    def __init__(self, argument: str, rule: str, detail: str, value: Any = None):
        super().__init__(f"{argument}: {rule}: {detail}")
        self.argument = argument
        self.rule = rule
        self.detail = detail
        self.value = value

    def details(self) -> dict[str, Any]:
        d: dict[str, Any] = {"argument": self.argument, "rule": self.rule, "detail": self.detail}
        if isinstance(self.value, str):
            d["value"] = self.value[:512]
        return d


class SchemaViolation(InvocationError):
    """Arguments or result do not match schema.json (``where``: input|output|schema)."""

    kind = FailureKind.SCHEMA_VIOLATION

    def __init__(self, where: str, path: str, message: str):
        super().__init__(f"{where} {path}: {message}")
        self.where = where
        self.path = path
        self.message = message

    def details(self) -> dict[str, Any]:
        return {"where": self.where, "path": self.path, "message": self.message[:1000]}


class NetworkDenied(InvocationError):
    """A host outside what the executor may reach: not on both its manifest's
    list and the instance's ``[network] allow`` (metnos/mechanisms/sandbox/netallow.py).

    Raised by the policy check for a host argument; the egress proxy reports
    the same kind for a connection it refused at run time.
    """

    kind = FailureKind.NETWORK_DENIED

    def __init__(self, argument: str, host: str, port: int | None, detail: str):
        super().__init__(f"{argument}: {host}{'' if port is None else f':{port}'}: {detail}")
        self.argument = argument
        self.host = host
        self.port = port
        self.detail = detail

    def details(self) -> dict[str, Any]:
        return {"argument": self.argument, "rule": "not-allowed", "host": self.host, "port": self.port,
                "detail": self.detail}


class SandboxUnavailable(InvocationError, MetnosError):
    """Nothing may run: bwrap cannot start, or METNOS_SANDBOX has a value
    that is neither on nor off. Never a reason to run unsandboxed
    (DESIGN decision 4); ``fix`` says what the user can do.

    A MetnosError too, so that a boot or a turn refused for it ends as one
    line on the command line.
    """

    kind = FailureKind.SANDBOX_UNAVAILABLE

    def __init__(self, reason: str, fix: str):
        super().__init__(f"the sandbox cannot run executors: {reason}; {fix}")
        self.reason = reason
        self.fix = fix

    def details(self) -> dict[str, Any]:
        return {"message": str(self), "reason": self.reason, "fix": self.fix}
