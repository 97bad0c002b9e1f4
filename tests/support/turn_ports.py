"""In-process turn ports for tests and benchmarks: no model, no executor, no waiting.

Executor calls still produce real Invocation aggregates (so the log and the
replayer see what a live turn records); what a call observes and how an
approval is answered are left to subclasses.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID

from domain.invocation import Invocation
from domain.canonical import canonical_hash
from metnos.runtime.turn.ports import ExecutorResult

_ids = itertools.count(1)


class InProcessPorts:
    start = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)
    tick = timedelta(milliseconds=1)
    caller = "in-process"

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.t = self.start

    def now(self) -> datetime:
        self.t += self.tick
        return self.t

    def new_id(self) -> UUID:
        return UUID(int=next(_ids))

    def observe(self, name: str, args: dict[str, Any], step: int) -> dict[str, Any]:
        return {"ok": True}

    def call_executor(self, name, args, *, turn_id, step, actor, channel):  # noqa: ANN001, ANN201
        le = self.runtime.report.get(name)
        output = self.observe(name, args, step)
        inv = Invocation.request(
            id=UUID(int=next(_ids)), at=self.now(), executor=name, version=le.version, origin=le.origin, digest=le.digest,
            args=args, args_hash=canonical_hash(args), caller={"kind": self.caller}, turn_id=turn_id, trace_id=turn_id,
        )
        inv.complete(at=self.now(), ok=True, kind="ok", exit_code=0, duration_ms=0, output_hash=None, output_size=0,
                     output=output, error=None, stderr_tail="")
        return ExecutorResult(str(inv.id), name, le.version, le.digest, inv.args_hash, True, "ok", output, [inv])

    def call_builtin(self, name, args, *, step, approval=None, models=None):  # noqa: ANN001, ANN201
        return {"ok": True, "schedules": [], "builtin": name}, []

    def can_ask(self) -> bool:
        return False

    def ask_user(self, question):  # noqa: ANN001, ANN201
        return None, "no-asker"

    def mnest_boost(self, ranking, context):  # noqa: ANN001, ANN201
        return None

    def mnest_suggest(self, name, args, invoked, step):  # noqa: ANN001, ANN201
        return None

    def mnest_hint(self, name, context, step):  # noqa: ANN001, ANN201
        return None

    def approve(self, step, executor, args, reason):  # noqa: ANN001, ANN201
        return True, self.caller
