"""Turns for the cascade's tests, in process: the real loop and log, the model a script.

``ask`` runs one turn through the real turn loop, the real cascade (its
consultation, plans projection and player) and the real LMDB log; read_files
is its own code run in process on the real files under HOME (no sandbox). The
model is a list of replies; once they run out it says it could not tell.
``recorded_turn`` writes the events of a turn the loop cannot yet end that way
(an answer the answer check refused), through the sink a live turn uses.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import metnos
from domain.turn import Turn
from metnos.mechanisms.llm.messages import LLMReply, ToolCall
from metnos.runtime.turn.loop import TurnLoop, TurnRequest
from metnos.runtime.turn.session import LogSink, guard_policy, plan_port, policy_checker, turn_catalogue
from metnos.settings import load_turn_settings
from tests.support.turn_ports import InProcessPorts
from tests.support.workspace_template import initialise

_spec = importlib.util.spec_from_file_location("read_files_main", Path(__file__).resolve().parents[2] / "executors" / "read_files" / "main.py")
read_files = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(read_files)  # type: ignore[union-attr]
_calls = itertools.count(1)


@contextmanager
def initialised_runtime(root: Path) -> Iterator[Any]:
    """A runtime on a workspace `metnos init` made under ``root``, HOME ``root/user`` with a notes folder."""
    from metnos.runtime.booted import Runtime

    saved = {k: os.environ.get(k) for k in ("METNOS_HOME", "HOME")}
    os.environ["METNOS_HOME"] = str(root / "home")
    os.environ["HOME"] = str(root / "user")
    (root / "user" / "notes").mkdir(parents=True)
    try:
        initialise(os.environ)
        runtime = Runtime.boot(birth=False)
        try:
            yield runtime
        finally:
            runtime.close()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def read(path: str) -> dict[str, Any]:
    """read_files' output for one path, as the executor gives it."""
    home = str(Path.home())
    return read_files.run({"paths": [path]}, {"workspace": {"home": home, "root": home}})


class ScriptedModel(InProcessPorts):
    caller = "test"

    def __init__(self, runtime: Any, replies: list[LLMReply]) -> None:
        super().__init__(runtime)
        self.replies = list(replies)
        self.asked = 0

    def ask_llm(self, tier, messages, tools, *, tool_choice="auto", constraint=None):  # noqa: ANN001, ANN201
        self.asked += 1
        if self.replies:
            return self.replies.pop(0)
        return LLMReply(text="I could not tell what it says.", tool_calls=(), call_form="none", raw={})

    def observe(self, name, args, step):  # noqa: ANN001, ANN201
        assert name == "read_files", name
        home = str(Path.home())
        return read_files.run(args, {"workspace": {"home": home, "root": home}})


def walk(path: str, answer: str, **args: Any) -> list[LLMReply]:
    """The model reads the file (with ``args`` besides its path) and answers."""
    call = ToolCall(f"call_{next(_calls)}", "read_files", {"paths": [path], **args})
    return [LLMReply(text="", tool_calls=(call,), call_form="native", raw={}),
            LLMReply(text=answer, tool_calls=(), call_form="none", raw={})]


def ask(runtime: Any, text: str, replies: list[LLMReply], *, cache: bool = True) -> tuple[str | None, str, int, str]:
    """(answer, status, model calls, turn id) of one turn; ``cache=False`` is ``ask --no-cache``."""
    env = {"HOME": str(Path.home()), "METNOS_OPENING_READS": "0"}
    catalogue = turn_catalogue(runtime)
    checker = policy_checker(runtime, env)
    ports = ScriptedModel(runtime, replies)
    ports.consult_plans = plan_port(runtime, catalogue, checker, env, cache=cache)  # type: ignore[attr-defined]
    loop = TurnLoop(ports=ports, catalogue=catalogue, settings=load_turn_settings(env), policy=guard_policy(runtime, env),
                    sink=LogSink(runtime), runtime_version=metnos.__version__, check_policy=checker)
    outcome = loop.run(TurnRequest(text=text))
    return outcome.answer, outcome.status, ports.asked, outcome.turn_id


def followed_plan(runtime: Any, turn_id: str) -> dict[str, Any]:
    """The plan the cascade gave the turn, as its PlanConsulted event records it."""
    [consulted] = [e for e in runtime.log.events.get(UUID(turn_id)) if isinstance(e, Turn.PlanConsulted)]
    return consulted.plan


def recorded_turn(runtime: Any, text: str, path: str, *, answer: str, status: str = "answered",
                  followed: tuple[str, dict[str, Any]] | None = None, rejected: str | None = None) -> str:
    """A turn that read ``path`` (really) and ended answered, or failed with ``status``;
    ``followed`` is the (template id, plan) the cascade gave it; ``rejected`` an answer
    refused before the one it ended with. Saved through LogSink."""
    clock = runtime.clock
    turn = Turn.start(id=runtime.ids(), at=clock(), text=text, actor="user", channel="cli", mode="normal",
                      settings={}, runtime_version=metnos.__version__)
    if followed is not None:
        turn.record(Turn.PlanConsulted, at=clock(), layer="L1", entry=followed[0], how="template", plan=followed[1],
                    similarity=None, reason=None, rejected=[], lookup_ms=0)
    version = runtime.report.get("read_files").version
    turn.record(Turn.StepProposed, at=clock(), step=1, call_id="c1", executor="read_files", args={"paths": [path]}, call_form="native")
    turn.record(Turn.StepInvoked, at=clock(), step=1, invocation_id=str(runtime.ids()), executor="read_files", version=version,
                digest="d", args_hash="h", ok=True, kind="ok", exec_ms=1)
    turn.record(Turn.ObservationRecorded, at=clock(), step=1, ok=True, observation=read(path), spill={})
    if rejected is not None:
        turn.record(Turn.AnswerRejected, at=clock(), round=1, reason="unverified", text=rejected)
    if status == "answered":
        turn.record(Turn.TurnAnswered, at=clock(), text=answer, steps=1)
    else:
        turn.record(Turn.TurnFailed, at=clock(), kind="answer_unchecked", final_kind="answer_unchecked",
                    message=f"the answer {answer!r} did not pass the check", steps=1, status=status)
    LogSink(runtime).commit([turn])
    return str(turn.id)
