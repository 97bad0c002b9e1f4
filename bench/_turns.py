"""Shared by the turn benchmarks: a workspace and in-process ports with no model or executor time."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from metnos.mechanisms.llm.messages import LLMReply, ToolCall
from tests.support.turn_ports import InProcessPorts


def fresh_workspace(prefix: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("BENCH_DIR")))
    os.environ["METNOS_HOME"] = str(root / "home")
    os.environ["HOME"] = str(root / "user")
    (root / "user").mkdir()
    from metnos.adapters.cli import main

    main(["init"])
    return root


def script(steps: int) -> list[LLMReply]:
    replies = []
    for i in range(steps):
        call = ToolCall(f"call_{i}", "read_files", {"paths": [f"~/note{i}.md"]})
        replies.append(LLMReply(text="", tool_calls=(call,), call_form="native", raw={"id": i}))
    replies.append(LLMReply(text="the notes say hello", tool_calls=(), call_form="none", raw={}))
    return replies


class InstantPorts(InProcessPorts):
    """Model and executors that answer at once: what is left is the runtime's own cost."""

    caller = "bench"

    def __init__(self, runtime, replies) -> None:
        super().__init__(runtime)
        self.replies = list(replies)

    def ask_llm(self, tier, messages, tools, *, tool_choice="auto", constraint=None):
        return self.replies.pop(0)

    def observe(self, name, args, step):
        return {"ok": True, "content": f"hello from step {step}", "entries": [{"path": args["paths"][0], "size": 5}]}


def turn_loop(runtime, ports, env, rules=None):
    import metnos
    from metnos.runtime.turn.loop import TurnLoop
    from metnos.runtime.turn.session import LogSink, guard_policy, policy_checker, turn_catalogue
    from metnos.settings import load_turn_settings

    return TurnLoop(
        ports=ports, catalogue=turn_catalogue(runtime), settings=load_turn_settings(env), policy=guard_policy(runtime, env),
        sink=LogSink(runtime), runtime_version=metnos.__version__, check_policy=policy_checker(runtime, env), rules=rules,
    )
