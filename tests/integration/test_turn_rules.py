"""The real turn loop with one rule taken out of its list: the behaviour that rule is responsible for disappears,
and nothing else does. The loop, the log (LMDB on disk) and read_files (its own code, on real files) are real;
the model is a script (tests/support/cascade_turns.py)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

import metnos
from metnos.mechanisms.llm.messages import LLMReply, ToolCall
from metnos.runtime.turn.loop import TurnLoop, TurnOutcome, TurnRequest
from metnos.runtime.turn.rules import Timed, default_rules, without
from metnos.runtime.turn.session import LogSink, guard_policy, policy_checker, turn_catalogue
from metnos.settings.loader import load_turn_settings
from tests.support.cascade_turns import ScriptedModel, initialised_runtime


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory):
    with initialised_runtime(tmp_path_factory.mktemp("turn-rules")) as rt:
        (Path.home() / "notes" / "a.md").write_text("alpha")
        yield rt


def read(path: str, n: int) -> LLMReply:
    return LLMReply(text="", tool_calls=(ToolCall(f"call_{n}", "read_files", {"paths": [path]}),), call_form="native", raw={})


def say(text: str) -> LLMReply:
    return LLMReply(text=text, tool_calls=(), call_form="none", raw={})


def turn(runtime: Any, text: str, replies: list[LLMReply], rules: Any = None) -> tuple[TurnOutcome, list[Any]]:
    env = {"HOME": str(Path.home()), "METNOS_OPENING_READS": "0"}
    loop = TurnLoop(ports=ScriptedModel(runtime, replies), catalogue=turn_catalogue(runtime), settings=load_turn_settings(env),
                    policy=guard_policy(runtime, env), sink=LogSink(runtime), runtime_version=metnos.__version__,
                    check_policy=policy_checker(runtime, env), rules=rules)
    outcome = loop.run(TurnRequest(text=text))
    return outcome, list(runtime.log.events.get(UUID(outcome.turn_id)))


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_without_the_duplicate_read_guard_the_same_read_runs_twice(runtime: Any) -> None:
    script = [read("~/notes/a.md", 1), read("~/notes/a.md", 2), say("The note says alpha.")]
    outcome, events = turn(runtime, "what does ~/notes/a.md say", list(script))
    assert outcome.status == "answered" and kinds(events).count("StepInvoked") == 1 and "StepIntercepted" in kinds(events)
    outcome, events = turn(runtime, "what does ~/notes/a.md say", list(script), without("guards"))
    assert outcome.status == "answered" and kinds(events).count("StepInvoked") == 2 and "StepIntercepted" not in kinds(events)


def test_without_the_repeated_failure_rule_a_failed_call_runs_again(runtime: Any) -> None:
    script = [read("~/notes/gone.md", 1), read("~/notes/gone.md", 2), say("There is no ~/notes/gone.md.")]
    _, events = turn(runtime, "what does ~/notes/gone.md say", list(script))
    assert kinds(events).count("StepInvoked") == 1
    assert [e.decision["outcome"] for e in events if type(e).__name__ == "StepIntercepted"] == ["repeated_failure"]
    _, events = turn(runtime, "what does ~/notes/gone.md say", list(script), without("repeated_failure"))
    assert kinds(events).count("StepInvoked") == 2 and "StepIntercepted" not in kinds(events)


def test_without_the_answer_form_rule_a_tool_name_is_taken_for_the_answer(runtime: Any) -> None:
    script = [read("~/notes/a.md", 1), say("read_files"), say("The note says alpha.")]
    outcome, events = turn(runtime, "what does ~/notes/a.md say", list(script))
    assert outcome.answer == "The note says alpha." and [e.reason for e in events if type(e).__name__ == "AnswerRejected"] == ["tool_name"]
    outcome, events = turn(runtime, "what does ~/notes/a.md say", list(script), without("answer_form"))
    assert outcome.answer == "read_files" and "AnswerRejected" not in kinds(events)


def test_every_rule_timed_gives_the_same_events_and_says_where_its_time_went(runtime: Any) -> None:
    script = [read("~/notes/a.md", 1), say("The note says alpha.")]
    seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    timed = [Timed(rule, seconds[rule.name]) for rule in default_rules()]
    plain, plain_events = turn(runtime, "what does ~/notes/a.md say", list(script))
    measured, timed_events = turn(runtime, "what does ~/notes/a.md say", list(script), timed)
    assert (plain.status, plain.answer) == (measured.status, measured.answer) == ("answered", "The note says alpha.")
    assert kinds(plain_events) == kinds(timed_events)
    assert seconds["vaglio"]["on_resolved"] > 0 and seconds["grounded"]["on_conclusion"] > 0 and seconds["guards"]["on_call"] > 0
