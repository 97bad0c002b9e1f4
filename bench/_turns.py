"""Shared by the turn benchmarks: a workspace and in-process ports with no model or executor time."""

from __future__ import annotations

import itertools
import os
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import UUID

from domain.invocation import Invocation
from metnos.canonical import canonical_hash
from metnos.llm.messages import LLMReply, ToolCall
from metnos.turn.ports import ExecutorResult

_ids = itertools.count(1)


def fresh_workspace(prefix: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("BENCH_DIR")))
    os.environ["METNOS_HOME"] = str(root / "home")
    os.environ["HOME"] = str(root / "user")
    (root / "user").mkdir()
    from metnos.cli import main

    main(["init"])
    return root


def script(steps: int) -> list[LLMReply]:
    replies = []
    for i in range(steps):
        call = ToolCall(f"call_{i}", "read_files", {"paths": [f"~/note{i}.md"]})
        replies.append(LLMReply(text="", tool_calls=(call,), call_form="native", raw={"id": i}))
    replies.append(LLMReply(text="the notes say hello", tool_calls=(), call_form="none", raw={}))
    return replies


class InstantPorts:
    """Model and executors that answer at once: what is left is the runtime's own cost."""

    def __init__(self, runtime, replies) -> None:
        self.runtime = runtime
        self.replies = list(replies)
        self.t = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)

    def now(self) -> datetime:
        self.t += timedelta(milliseconds=1)
        return self.t

    def new_id(self) -> UUID:
        return UUID(int=next(_ids))

    def ask_llm(self, tier, messages, tools):
        return self.replies.pop(0)

    def call_executor(self, name, args, *, turn_id, step, actor, channel):
        le = self.runtime.report.get(name)
        output = {"ok": True, "content": f"hello from step {step}", "entries": [{"path": args["paths"][0], "size": 5}]}
        inv = Invocation.request(
            id=UUID(int=next(_ids)), at=self.now(), executor=name, version=le.version, origin=le.origin, digest=le.digest,
            args=args, args_hash=canonical_hash(args), caller={"kind": "bench"}, turn_id=turn_id, trace_id=turn_id,
        )
        inv.complete(at=self.now(), ok=True, kind="ok", exit_code=0, duration_ms=0, output_hash=None, output_size=0,
                     output=output, error=None, stderr_tail="")
        return ExecutorResult(str(inv.id), name, le.version, le.digest, inv.args_hash, True, "ok", output, [inv])

    def call_builtin(self, name, args, *, step):
        return {"ok": True, "schedules": [], "builtin": name}, []

    def mnest_boost(self, ranking, context):
        return None

    def mnest_suggest(self, name, args, invoked, step):
        return None

    def approve(self, step, executor, args, reason):
        return True, "bench"


def turn_loop(runtime, ports, env):
    import metnos
    from metnos.turn.loop import TurnLoop
    from metnos.turn.session import LogSink, guard_policy, policy_checker, turn_catalogue
    from metnos.turn.settings import load_turn_settings

    return TurnLoop(
        ports=ports, catalogue=turn_catalogue(runtime), settings=load_turn_settings(env), policy=guard_policy(runtime, env),
        sink=LogSink(runtime), runtime_version=metnos.__version__, check_policy=policy_checker(runtime, env),
    )
