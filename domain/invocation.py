"""One call of an executor, from request to outcome (seeds/000 ch. 8 and 9)."""

from __future__ import annotations

from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate


class Invocation(MetnosAggregate):
    class InvocationRequested(Created):
        executor: str
        version: str
        origin: str
        digest: str
        args: dict
        args_hash: str
        caller: dict
        turn_id: str | None
        trace_id: str
        # The autonomy level the call ran at (metnos/mechanisms/sandbox/autonomy.py); older events: supervised.
        autonomy: str = "supervised"

    class InvocationRefused(DomainEvent):
        """Stopped before any spawn: policy, schema, quarantine, approval."""

        kind: str
        error: dict
        # How executors run here: "bwrap", "off" (METNOS_SANDBOX=off) or
        # "unavailable" (refused: nothing may run); "" in events recorded
        # before the field existed, and for refusals decided before it mattered.
        sandbox: str = ""

        def apply(self, invocation: Invocation) -> None:
            invocation.outcome = self.kind

    class FilesCaptured(DomainEvent):
        """Before-images of the paths the executor may change, taken just before it ran.

        One record per path: its state down to each file's blob digest, or why
        it could not be kept (then that path cannot be undone).
        """

        before: list

    class InvocationCompleted(DomainEvent):
        ok: bool
        kind: str
        exit_code: int | None
        duration_ms: int
        output_hash: str | None
        output_size: int
        output: Any
        error: dict | None
        stderr_tail: str
        # The egress proxy's record of each connection (host, port, method,
        # allowed, reason); None when the executor had no network.
        network: list | None = None
        sandbox: str = ""  # as in InvocationRefused

        def apply(self, invocation: Invocation) -> None:
            invocation.outcome = self.kind

    class FilesSettled(DomainEvent):
        """The same paths as the executor left them: what undo checks is still there."""

        after: list

    def __init__(self, executor: str, version: str, origin: str, digest: str, args: dict, args_hash: str, caller: dict, turn_id: str | None, trace_id: str) -> None:
        self.executor = executor
        self.executor_version = version
        self.origin = origin
        self.digest = digest
        self.args = args
        self.args_hash = args_hash
        self.caller = caller
        self.turn_id = turn_id
        self.trace_id = trace_id
        self.outcome: str | None = None

    @classmethod
    def request(cls, *, id: Any, at: Any, **fields: Any) -> Invocation:  # noqa: A002
        return cls._create(cls.InvocationRequested, id=id, timestamp=at, **fields)

    def refuse(self, *, kind: str, error: dict, at: Any, sandbox: str = "") -> None:
        self.trigger_event(self.InvocationRefused, kind=kind, error=error, sandbox=sandbox, timestamp=at)

    def complete(self, *, at: Any, **fields: Any) -> None:
        self.trigger_event(self.InvocationCompleted, timestamp=at, **fields)

    def capture_files(self, *, before: list, at: Any) -> None:
        self.trigger_event(self.FilesCaptured, before=before, timestamp=at)

    def settle_files(self, *, after: list, at: Any) -> None:
        self.trigger_event(self.FilesSettled, after=after, timestamp=at)
