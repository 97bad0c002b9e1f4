"""Each rule of the turn loop on its own (metnos/runtime/turn/rules): the point it looks at, the verdict it gives,
what it records and what it leaves in the turn's state. The loop around them is a small stand-in that keeps the
events; tests/integration/test_turn_rules.py runs the real loop with a rule taken out."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest

from metnos.mechanisms.failures import PolicyViolation
from metnos.mechanisms.llm.messages import LLMReply, ToolCall, UserMessage
from metnos.runtime.turn.answers import REASONS
from metnos.runtime.turn.asking import callable_tools
from metnos.runtime.turn.failures import FailureKind
from metnos.runtime.turn.guards import TurnGuards
from metnos.runtime.turn.interrupts import InterruptGate
from metnos.runtime.turn.rules import Timed, default_rules, without
from metnos.runtime.turn.rules.answers import ActionTaken, AnswerForm, AnswerOnly, Placeholders, RestsOnRecovery
from metnos.runtime.turn.rules.base import Answer, AnswerInstead, AnswerWith, End, Round, SendBack, Settle, Step, Unfounded, WordsOnly
from metnos.runtime.turn.rules.calls import (
    ArgumentSchema, AutonomyLevel, Guards, KnownExecutor, MadeUpValues, PipelineShape, ReadableArguments, RepeatedFailure,
    SandboxPolicy, StepReferences,
)
from metnos.runtime.turn.rules.grounding import Grounded
from metnos.runtime.turn.rules.recovery import ClimbTier, Presentation, Recovery
from metnos.runtime.turn.rules.vaglio import Vaglio
from metnos.runtime.step.shape import ShapeStep
from metnos.runtime.turn.turn_state import EndTurn, TurnRequest, TurnState
from metnos.runtime.step.vaglio import GuardPolicy

HOME = "/home/u"
PATHS = {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}}, "required": ["paths"],
         "additionalProperties": False}


def executor(*, side_effects: bool = False, schema: dict[str, Any] | None = None) -> Any:
    schema = schema or PATHS
    return SimpleNamespace(entry=SimpleNamespace(side_effects=side_effects, idempotent=not side_effects, vectorial=False),
                           tool=SimpleNamespace(name="", parameters=schema), loaded=SimpleNamespace(input_schema=schema))


class Catalogue:
    def __init__(self, executors: dict[str, Any]) -> None:
        self.executors, self.builtins = executors, {}
        self.machine_names = frozenset(executors)
        self.verdict_words: dict[str, dict[str, frozenset[str]]] = {}

    def get(self, name: str) -> Any:
        return self.executors.get(name)

    def tools(self, names: list[str], *, with_scratchpad: bool = False) -> list[Any]:
        return [SimpleNamespace(name=n, parameters=self.executors[n].tool.parameters) for n in names]


class Loop:
    """What a rule asks of the loop: the catalogue, the ports, the recording."""

    def __init__(self, executors: dict[str, Any] | None = None, *, approve: bool = True, check_policy: Any = None) -> None:
        self.catalogue = Catalogue(executors if executors is not None else {"read_files": executor(), "delete_files": executor(side_effects=True)})
        self.settings = SimpleNamespace(cap_steps=8, judge_threshold=0.5)
        self.policy = GuardPolicy.core(HOME)
        self.ports = SimpleNamespace(approve=lambda *a: (approve, "test"), mnest_suggest=lambda *a: None)
        self.judge = SimpleNamespace(applies=lambda *a, **k: False)
        self.online = SimpleNamespace(config=SimpleNamespace(mnest_hint=False, unasked_options=True, schedule_closes_turn=True,
                                                              unasked_end=True, grounding_reads_told=True, done_is_ok=True,
                                                              grounding_whole_asks=True, done_not_denied=True,
                                                              grounding_after_loop=True, grounding_quoted_names=True, data_asked_for=True, grounding_verdicts=True,
                                                              grounding_verdict_words=True, grounding_names=True, grounding_named_data=True, refused_call_repeated=True, named_action_done=True, grounding_picks_named=True, requested_destination=True, held_data_after_detour=True, done_not_denied_once=True, refusal_retried_after_step=True, schedule_carries_reads=True, day_from_request=True, repeat_as_proposed=True, held_data_after_failed_step=True, held_data_words_served=True, schedule_reads_named_sources=True, repeated_answer_sent_back=True, grounding_slice_end=True, empty_list_excuses_takers=True, runtime_hints_echoed=True, grounding_whole_lists=True, grounding_whole_counts=True,
                                                              name_conditions=True))
        self.interrupts = InterruptGate()
        self.tool_names = frozenset(self.catalogue.executors)
        self.shown_home = HOME
        self.check_policy = check_policy
        self.events: list[tuple[str, dict[str, Any]]] = []

    def record(self, turn: Any, event_class: type, **fields: Any) -> None:
        self.events.append((event_class.__name__, fields))

    def commit(self, turn: Any, *others: Any) -> None:
        self.events.append(("commit", {}))

    def commit_now(self, turn: Any) -> None:
        self.events.append(("commit_now", {}))

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]


def a_step(loop: Loop, name: str, args: dict[str, Any], state: TurnState | None = None, *, pool: list[str] | None = None,
           autonomy: str = "supervised", arguments_error: str | None = None, text: str = "read ~/a.md") -> Step:
    state = state or TurnState()
    state.step += 1
    call = ToolCall(f"c{state.step}", name, args, arguments_error=arguments_error)
    return Step(loop, SimpleNamespace(id="t"), state, TurnRequest(text=text, autonomy=autonomy), pool or list(loop.catalogue.executors),
                call, state.step, name, dict(args), loop.catalogue.get(name), "executor")


def an_answer(loop: Loop, text: str, state: TurnState, *, source: str = "model", pool: list[str] | None = None,
              request: str = "read ~/a.md", repairable: bool = True) -> Answer:
    reply = LLMReply(text=text, tool_calls=(), call_form="none", raw={})
    messages = [UserMessage("system"), UserMessage(request)]
    return Answer(loop, SimpleNamespace(id="t"), state, TurnRequest(text=request), pool if pool is not None else ["read_files"],
                  messages, text, source, reply, repairable)


def ran(step: Step, observation: dict[str, Any], *, ok: bool = True, result_kind: str = "ok") -> Step:
    """The step as the loop leaves it once its executor ran."""
    step.ran, step.succeeded, step.observation, step.result_kind = ok, ok and observation.get("ok") is not False, observation, result_kind
    step.state.observations[step.number] = observation
    step.state.executed[step.number] = (step.name, "1.0.0")
    return step


# The list -------------------------------------------------------------------------

def test_the_rules_run_in_the_order_the_spec_gives_a_step_and_an_answer() -> None:
    assert [r.name for r in default_rules()] == [
        "climb_tier", "answer_only", "guards", "repeated_failure", "readable_arguments", "autonomy", "known_executor", "pipeline_shape",
        "step_references", "argument_schema", "made_up_values", "unasked_options", "unasked_end", "requested_kind", "requested_names", "requested_top", "append_once", "schedule_made", "sandbox_policy", "requested_destination", "exfiltration", "vaglio", "dialog", "recovery", "presentation", "action_taken",
        "placeholders", "answer_form", "rests_on_recovery", "says_not_done", "grounded",
    ]


def test_a_rule_is_taken_out_by_its_name_and_a_name_no_rule_has_is_refused() -> None:
    assert "guards" not in [r.name for r in without("guards")] and len(without("guards")) == len(default_rules()) - 1
    with pytest.raises(ValueError, match="no rule is named gaurds"):
        without("gaurds")


def test_a_timed_rule_gives_the_same_verdict_and_adds_up_its_time() -> None:
    loop = Loop()
    seconds: dict[str, float] = defaultdict(float)
    timed = Timed(ReadableArguments(), seconds)
    verdict = timed.on_call(a_step(loop, "read_files", {}, arguments_error="not JSON"))
    assert isinstance(verdict, Settle) and verdict.observation["error_class"] == "invalid_arguments"
    assert timed.name == "readable_arguments" and seconds["on_call"] > 0 and timed.on_answer(an_answer(loop, "x", TurnState())) is None


# The checks on a call --------------------------------------------------------------

def test_guards_intercept_a_duplicate_read_then_ask_for_words_when_it_comes_again() -> None:
    loop, state = Loop(), TurnState(guards=TurnGuards())
    first = a_step(loop, "read_files", {"paths": ["~/a.md"]}, state)
    assert Guards().on_call(first) is None
    ran(first, {"ok": True, "content": "alpha"})
    state.guards = state.guards.record(1, "read_files", {"paths": ["~/a.md"]}, executed=True, succeeded=True)
    again = Guards().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state, pool=["read_files"]))
    assert isinstance(again, Settle) and state.answer_from == (1,) and not state.final_only
    third = Guards().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state, pool=["read_files"]))
    assert isinstance(third, Settle) and state.final_only
    assert [f["decision"]["outcome"] for k, f in loop.events if k == "StepIntercepted"] == ["duplicate_read", "duplicate_read_repeated"]


def test_a_tool_whose_call_came_back_for_data_the_turn_holds_is_out_of_the_grammar_until_another_step_runs() -> None:
    """The 1.5B asked twice more for the folder the turn had listed, then answered from the listing; the tool beside
    it that had what was asked (the repository's log) was never called."""
    loop, state = Loop(), TurnState(guards=TurnGuards())
    tools = [SimpleNamespace(name=n) for n in ("read_files", "get_git_log")]
    first = a_step(loop, "read_files", {"paths": ["~/a.md"]}, state)
    ran(first, {"ok": True, "content": "alpha"})
    state.guards = state.guards.record(1, "read_files", {"paths": ["~/a.md"]}, executed=True, succeeded=True)
    assert [t.name for t in callable_tools(state, tools)] == ["read_files", "get_git_log"]
    Guards().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state, pool=["read_files", "get_git_log"]))
    assert [t.name for t in callable_tools(state, tools)] == ["get_git_log"]
    ran(a_step(loop, "get_git_log", {"repo_path": "~/p"}, state), {"ok": True, "text": "Fix the lamp"})
    assert [t.name for t in callable_tools(state, tools)] == ["read_files", "get_git_log"]


def test_a_duplicate_read_in_a_request_that_acts_is_told_to_act_before_words_are_asked_for() -> None:
    loop, state = Loop(), TurnState(guards=TurnGuards())
    state.guards = state.guards.record(1, "read_files", {"paths": ["~/a.md"]}, executed=True, succeeded=True)
    pool = ["read_files", "delete_files"]
    again = Guards().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state, pool=pool))
    assert isinstance(again, Settle) and "call delete_files now" in again.observation["hint"]
    third = Guards().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state, pool=pool))
    assert isinstance(third, Settle) and not state.final_only and state.reminded_to_act
    fourth = Guards().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state, pool=pool))
    assert isinstance(fourth, Settle) and state.final_only


def test_guards_end_the_turn_at_the_step_cap() -> None:
    loop, state = Loop(), TurnState(guards=TurnGuards(cap_steps=1))
    state.guards = state.guards.record(1, "read_files", {"paths": ["~/a.md"]}, executed=True, succeeded=True)
    state.step = 1
    verdict = Guards().on_call(a_step(loop, "read_files", {"paths": ["~/b.md"]}, state))
    assert verdict == End(FailureKind.CAP_STEPS, "8", commit=True)


def test_a_call_that_failed_is_not_run_again_and_the_second_time_words_are_asked_for() -> None:
    loop, state, rule = Loop(), TurnState(), RepeatedFailure()
    failed = ran(a_step(loop, "read_files", {"paths": ["~/gone.md"]}, state), {"ok": False, "error": "no such file"})
    rule.on_observation(failed)
    assert state.failed_calls == {failed.key: 1}
    again = rule.on_call(a_step(loop, "read_files", {"paths": ["~/gone.md"]}, state))
    assert isinstance(again, Settle) and again.observation["previous_steps"] == [1] and not state.final_only
    assert isinstance(rule.on_call(a_step(loop, "read_files", {"paths": ["~/gone.md"]}, state)), Settle) and state.final_only
    assert rule.on_call(a_step(loop, "read_files", {"paths": ["~/other.md"]}, state)) is None


def test_the_very_builtin_call_that_failed_is_not_run_again() -> None:
    # A scheduling call refused for its arguments, proposed again word for word (the 1.5B did
    # it ten times under a grammar): it is intercepted like an executor's.
    loop, state, rule = Loop(), TurnState(), RepeatedFailure()
    args = {"executor": "send_messages", "chain": [{"executor": "extract_lines"}], "cron": "0 8 * * *"}
    step = a_step(loop, "schedule_recurring", args, state)
    step.kind = "builtin"
    rule.on_observation(ran(step, {"ok": False, "error": {"kind": "BadArguments"}}))
    assert isinstance(rule.on_call(a_step(loop, "schedule_recurring", args, state)), Settle)


def test_unreadable_arguments_get_one_correction_round() -> None:
    loop, state, rule = Loop(), TurnState(), ReadableArguments()
    first = rule.on_call(a_step(loop, "read_files", {}, state, arguments_error="Expecting ',' delimiter"))
    assert isinstance(first, Settle) and "one JSON object" in first.observation["hint"]
    assert state.problem == (FailureKind.STEP_FAILED, state.problem[1]) and loop.kinds() == ["StepRejected"]
    second = rule.on_call(a_step(loop, "read_files", {}, state, arguments_error="Expecting value"))
    assert isinstance(second, End) and second.kind is FailureKind.INVALID_ARGUMENTS and second.commit


CONVERT = {"type": "object", "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}},
           "required": ["amount", "currency"], "additionalProperties": False}


def test_a_first_call_that_takes_none_of_its_values_from_the_request_is_not_run_and_words_are_asked_for() -> None:
    loop, state, rule = Loop({"convert_money": executor(schema=CONVERT)}), TurnState(), MadeUpValues()
    verdict = rule.on_call(a_step(loop, "convert_money", {"amount": 100, "currency": "CHF"}, state, text="Which is the longest river?"))
    assert isinstance(verdict, Settle) and verdict.observation["error_class"] == "made_up_values"
    assert "amount, currency" in verdict.observation["error"] and state.final_only
    assert loop.kinds() == ["StepIntercepted"] and loop.events[0][1]["decision"]["arguments"] == ["amount", "currency"]


def test_a_first_call_with_one_value_of_the_request_or_of_the_conversation_runs() -> None:
    loop, rule = Loop({"convert_money": executor(schema=CONVERT)}), MadeUpValues()
    state = TurnState()
    assert rule.on_call(a_step(loop, "convert_money", {"amount": 100, "currency": "CHF"}, state, text="Change 100 into euros")) is None
    step = a_step(loop, "convert_money", {"amount": 100, "currency": "CHF"}, state, text="and into pounds?")
    step.request = TurnRequest(text="and into pounds?", conversation={"earlier": [{"request": "How much are 100 francs in euros?",
                                                                                  "answer": "92 euros", "outcome": "answered"}]})
    assert rule.on_call(step) is None
    assert not state.final_only and loop.kinds() == []


def test_made_up_values_are_judged_only_before_any_step_ran_and_only_on_the_models_calls() -> None:
    loop, rule = Loop({"convert_money": executor(schema=CONVERT), "read_files": executor()}), MadeUpValues()
    state = TurnState()
    ran(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state), {"ok": True, "text": "rates"})
    assert rule.on_call(a_step(loop, "convert_money", {"amount": 100, "currency": "CHF"}, state, text="Which is the longest river?")) is None
    # An observation that no executor made (the user's answer to a question of the turn) is something the values may come from.
    answered = TurnState()
    answered.observations[1] = {"ok": True, "answer": "Swiss francs"}
    assert rule.on_call(a_step(loop, "convert_money", {"amount": 100, "currency": "CHF"}, answered, text="Which is the longest river?")) is None
    planned = TurnState()
    planned.plan = object()
    assert rule.on_call(a_step(loop, "convert_money", {"amount": 100, "currency": "CHF"}, planned, text="Which is the longest river?")) is None
    builtin = a_step(loop, "convert_money", {"amount": 100, "currency": "CHF"}, TurnState(), text="Which is the longest river?")
    builtin.kind = "builtin"
    assert rule.on_call(builtin) is None
    assert loop.kinds() == []


def test_read_only_autonomy_refuses_an_action_and_lets_a_read_through() -> None:
    loop, state = Loop(), TurnState()
    refused = AutonomyLevel().on_call(a_step(loop, "delete_files", {"paths": ["~/a.md"]}, state, autonomy="read_only"))
    assert isinstance(refused, Settle) and state.problem[0] is FailureKind.STEP_REFUSED
    assert loop.events[0][1]["kind"] == "autonomy"
    assert AutonomyLevel().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state, autonomy="read_only")) is None


def test_an_executor_the_catalogue_lacks_is_refused_with_the_names_it_has() -> None:
    loop = Loop()
    verdict = KnownExecutor().on_call(a_step(loop, "read_filez", {"paths": ["~/a.md"]}))
    assert isinstance(verdict, Settle) and verdict.observation["error_class"] == "unknown_executor"
    assert "read_files" in str(verdict.observation) and loop.events[0][1]["kind"] == "unknown_executor"
    assert KnownExecutor().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]})) is None


def test_a_second_action_after_the_pipeline_closed_is_refused_and_words_are_asked_for() -> None:
    loop, state = Loop({"move_files": executor(side_effects=True), "delete_files": executor(side_effects=True)}), TurnState()
    state.shape.append(ShapeStep("move_files", {"moves": [{"src": "~/a", "dst": "~/b"}]}, succeeded=True))
    verdict = PipelineShape().on_call(a_step(loop, "delete_files", {"paths": ["~/c"]}, state, pool=["move_files"]))
    assert isinstance(verdict, Settle) and verdict.observation["error_class"] == "pipeline_already_closed"
    assert state.final_only and state.pipeline_closed and loop.events[0][1]["kind"] == "shape"


def test_a_verb_outside_the_vocabulary_is_refused_as_the_shape_and_a_good_step_joins_the_shape() -> None:
    loop, state, rule = Loop({"frobnicate_files": executor(), "read_files": executor()}), TurnState(), PipelineShape()
    verdict = rule.on_call(a_step(loop, "frobnicate_files", {"paths": ["~/a"]}, state))
    assert isinstance(verdict, Settle) and verdict.observation["error_class"] == "unknown_verb"
    good = a_step(loop, "read_files", {"paths": ["~/a"]}, state)
    assert rule.on_call(good) is None and good.transition.category == "E"
    rule.on_observation(ran(good, {"ok": True, "content": "a"}))
    assert state.shape == [ShapeStep("read_files", {"paths": ["~/a"]}, succeeded=True)]


def test_a_reference_to_a_step_that_is_not_there_is_refused_with_the_steps_that_hold_a_list() -> None:
    loop, state, rule = Loop(), TurnState(), StepReferences()
    ran(a_step(loop, "read_files", {"paths": ["~/a"]}, state), {"ok": True, "entries": [{"path": "/home/u/a"}]})
    verdict = rule.on_call(a_step(loop, "read_files", {"from_step": 0}, state))
    assert isinstance(verdict, Settle) and "the steps with a list: 1 (read_files)" in verdict.observation["hint"]
    piped = a_step(loop, "read_files", {"from_step": 1}, state)
    assert rule.on_call(piped) is None and piped.resolution.args == {"entries": [{"path": "/home/u/a"}]}


def test_arguments_off_the_schema_are_refused_naming_what_is_required() -> None:
    loop, state = Loop(), TurnState()
    verdict = ArgumentSchema().on_call(a_step(loop, "read_files", {"path": 5}, state, text="tell me"))
    assert isinstance(verdict, Settle) and verdict.observation["error_class"] == "schema_violation"
    assert verdict.observation["hint"].endswith("(required: paths)") and state.argument_errors == 1
    good = a_step(loop, "read_files", {"paths": ["~/a.md"]}, state)
    assert ArgumentSchema().on_call(good) is None and good.arguments == {"paths": ["~/a.md"]}


def test_a_path_outside_the_grants_is_refused_by_the_sandbox_policy() -> None:
    def check(loaded: Any, args: dict[str, Any]) -> None:
        if any(not p.startswith("~/notes") for p in args["paths"]):
            raise PolicyViolation("/paths/0", "outside-grant", "not under ~/notes", args["paths"][0])

    loop, state = Loop(check_policy=check), TurnState()
    verdict = SandboxPolicy().on_call(a_step(loop, "read_files", {"paths": ["~/.bashrc"]}, state))
    assert isinstance(verdict, Settle) and verdict.observation["error"]["rule"] == "outside-grant"
    assert state.problem[0] is FailureKind.STEP_REFUSED
    assert SandboxPolicy().on_call(a_step(loop, "read_files", {"paths": ["~/notes/a.md"]}, state)) is None


def test_the_vaglio_asks_the_user_for_an_action_and_a_no_is_the_steps_observation() -> None:
    loop, state = Loop(approve=False), TurnState()
    verdict = Vaglio().on_resolved(a_step(loop, "delete_files", {"paths": ["~/a.md"]}, state, text="delete ~/a.md"))
    assert isinstance(verdict, Settle) and verdict.observation["error_class"] == "declined"
    # What the turn did so far is committed before the user is asked (they may take minutes).
    assert loop.kinds() == ["StepJudged", "ApprovalAsked", "commit_now", "ApprovalAnswered", "ObservationRecorded"]
    forbidden = Vaglio().on_resolved(a_step(Loop(), "read_files", {"paths": ["/home/u/.ssh/id_ed25519"]}, TurnState()))
    assert isinstance(forbidden, Settle) and forbidden.observation["error_class"] == "vaglio_denied"
    assert Vaglio().on_resolved(a_step(Loop(), "read_files", {"paths": ["~/a.md"]}, TurnState())) is None


def test_a_call_the_user_refused_proposed_again_word_for_word_is_a_repeated_failure_not_asked_again() -> None:
    """The 0.5B sent one unapproved commit twenty times, each judged and put to the user again."""
    loop, state = Loop(approve=False), TurnState()
    Vaglio().on_resolved(a_step(loop, "delete_files", {"paths": ["~/a.md"]}, state, text="delete ~/a.md"))
    again = a_step(loop, "delete_files", {"paths": ["~/a.md"]}, state, text="delete ~/a.md")
    verdict = RepeatedFailure().on_call(again)
    assert isinstance(verdict, Settle) and verdict.observation["error_class"] == "repeated_failure"
    assert loop.kinds().count("ApprovalAsked") == 1
    # Other arguments are another call: judged, and asked, as any.
    assert RepeatedFailure().on_call(a_step(loop, "delete_files", {"paths": ["~/b.md"]}, state, text="delete ~/a.md")) is None


# What an observation means -----------------------------------------------------------

def test_a_step_that_could_not_run_is_the_problem_until_an_action_goes_through() -> None:
    loop, state, rule = Loop({"read_files": executor(), "write_files": executor(side_effects=True)}), TurnState(), Recovery()
    rule.on_observation(ran(a_step(loop, "read_files", {"paths": ["~/a"]}, state), {"ok": False, "error": "timeout"}, ok=False))
    assert state.problem[0] is FailureKind.STEP_FAILED
    good = ran(a_step(loop, "read_files", {"paths": ["~/b"]}, state), {"ok": True, "content": "b"})
    rule.on_observation(good)
    assert state.problem is not None and state.since_problem == [{"ok": True, "content": "b"}]
    write = a_step(loop, "write_files", {"path": "~/c", "content": "b"}, state)
    write.transition = SimpleNamespace(category="A")
    rule.on_observation(ran(write, {"ok": True, "written": "~/c"}))
    assert state.problem is None and state.since_problem == []


def test_a_step_on_earlier_data_that_fails_is_the_problem_a_failed_read_is_not() -> None:
    # "none of the 7 entries has the field 'content'" tells how the filter was called; the 1.5B
    # answered a count with it. A read that finds no file reports a fact the answer may give.
    # A read of a path the user named that finds no file reports a fact; of a path nobody named, the guess.
    from domain.provenance import MODEL, REQUEST, Provenance
    loop, state, rule = Loop({"read_files": executor(), "filter_entries": executor()}), TurnState(), Recovery()
    named = a_step(loop, "read_files", {"paths": ["~/gone"]}, state, text="what does ~/gone say?")
    named.provenance = {"paths.0": Provenance(REQUEST, span=(10, 16))}
    rule.on_observation(ran(named, {"ok": False, "error": "NotFound"}))
    assert state.problem is None
    guessed_state = TurnState()
    guessed = a_step(loop, "read_files", {"paths": ["~/gone"]}, guessed_state, text="what are my plans?")
    guessed.provenance = {"paths.0": Provenance(MODEL)}
    rule.on_observation(ran(guessed, {"ok": False, "error": "NotFound"}))
    assert guessed_state.problem is not None and guessed_state.problem[0] is FailureKind.STEP_FAILED
    ran(a_step(loop, "read_files", {"paths": ["~/log"]}, state), {"ok": True, "entries": [{"line": "x"}]})
    filtering = a_step(loop, "filter_entries", {"from_step": 2, "field": "content"}, state)
    filtering.resolution = SimpleNamespace(pipings=("step 2 entries",))
    rule.on_observation(ran(filtering, {"ok": False, "error": {"class": "NoSuchField"}}))
    assert state.problem is not None and state.problem[0] is FailureKind.STEP_FAILED
    verdict = RestsOnRecovery().on_answer(an_answer(loop, "The filter could not be applied.", state))
    assert isinstance(verdict, End) and verdict.kind is FailureKind.STEP_FAILED


def test_a_presentation_in_a_request_that_changes_nothing_is_the_answer() -> None:
    loop, state = Loop({"describe_entries": executor()}), TurnState()
    shown = a_step(loop, "describe_entries", {"from_step": 1}, state)
    shown.transition = SimpleNamespace(category="F")
    Presentation().on_observation(ran(shown, {"ok": True, "content": "a table"}))
    assert state.presented == 1
    acting = Loop({"describe_entries": executor(), "delete_files": executor(side_effects=True)})
    other = TurnState()
    shown = a_step(acting, "describe_entries", {"from_step": 1}, other)
    shown.transition = SimpleNamespace(category="F")
    Presentation().on_observation(ran(shown, {"ok": True, "content": "a table"}))
    assert other.presented is None


# The checks on an answer -----------------------------------------------------------

def test_an_answer_with_a_step_placeholder_is_sent_back_once() -> None:
    loop, state = Loop(), TurnState()
    verdict = Placeholders().on_answer(an_answer(loop, "It says {{step1.content}}", state))
    assert isinstance(verdict, SendBack) and "{{" in verdict.messages[1].text and state.corrections == 1
    assert Placeholders().on_answer(an_answer(loop, "It says {{step1.content}}", state)) is None
    assert Placeholders().on_answer(an_answer(loop, "{{x}}", TurnState(), source="plan")) is None


def test_a_tool_name_for_an_answer_is_sent_back_once_then_fails_the_turn() -> None:
    loop, state = Loop(), TurnState()
    verdict = AnswerForm().on_answer(an_answer(loop, "read_files", state))
    assert isinstance(verdict, SendBack) and loop.events == [("AnswerRejected", {"round": 0, "reason": "tool_name", "text": "read_files"})]
    assert AnswerForm().on_answer(an_answer(loop, "read_files", state)) == End(FailureKind.UNUSABLE_ANSWER, REASONS["tool_name"])
    state.answer_from = (1,)
    assert AnswerForm().on_answer(an_answer(loop, "read_files", state)) == AnswerWith((1,))
    assert AnswerForm().on_answer(an_answer(loop, "The file says alpha.", TurnState())) is None


def test_a_runaway_answer_is_sent_back_once_then_fails_the_turn_and_turns_recorded_before_keep_it() -> None:
    runaway = " ".join(["The commit history was not run."] * 10)
    loop, state = Loop(), TurnState()
    verdict = AnswerForm().on_answer(an_answer(loop, runaway, state))
    assert isinstance(verdict, SendBack) and loop.events[0][1]["reason"] == "repeated"
    assert AnswerForm().on_answer(an_answer(loop, runaway, state)) == End(FailureKind.UNUSABLE_ANSWER, REASONS["repeated"])
    loop.online.config.repeated_answer_sent_back = False
    assert AnswerForm().on_answer(an_answer(loop, runaway, TurnState())) is None
    loop.online.config.repeated_answer_sent_back = True


def test_an_answer_before_the_action_ran_is_reminded_once_and_a_plans_is_refused_at_once() -> None:
    loop, pool = Loop(), ["read_files", "delete_files"]
    state = TurnState()
    reminded = ActionTaken().on_answer(an_answer(loop, "Deleted.", state, pool=pool))
    assert isinstance(reminded, SendBack) and state.reminded_to_act and loop.events[0][1]["reason"] == "action_not_taken"
    assert ActionTaken().on_answer(an_answer(loop, "Deleted.", state, pool=pool)) == End(FailureKind.ACTION_NOT_TAKEN, "delete_files")
    assert ActionTaken().on_answer(an_answer(loop, "Deleted.", TurnState(), pool=pool, source="plan")) == End(FailureKind.ACTION_NOT_TAKEN, "delete_files")
    acted = TurnState()
    ActionTaken().on_observation(ran(a_step(loop, "delete_files", {"paths": ["~/a"]}, acted), {"ok": True}))
    assert acted.acted and ActionTaken().on_answer(an_answer(loop, "Deleted.", acted, pool=pool)) is None


def test_after_a_problem_an_answer_must_rest_on_what_succeeded_since() -> None:
    loop, state = Loop(), TurnState(problem=(FailureKind.STEP_FAILED, "read_files failed"))
    assert RestsOnRecovery().on_answer(an_answer(loop, "It says omega.", state)) == End(FailureKind.STEP_FAILED, "read_files failed")
    state.since_problem = [{"ok": True, "content": "omega and more"}]
    assert RestsOnRecovery().on_answer(an_answer(loop, "It says omega.", state)) is None


def test_a_detour_that_went_wrong_after_the_model_was_told_its_data_answers_leaves_that_data_the_answer() -> None:
    """The 0.5B read the diary, read it again (told the data was there), then asked for the file as a web page, which
    the sandbox refused: the turn ended refused though step 1 held the lines asked for."""
    loop = Loop({"read_files": executor(), "read_urls_html": executor()})
    pool = ["read_files", "read_urls_html"]
    state = TurnState(guards=TurnGuards())
    ran(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state), {"ok": True, "content": "alpha"})
    state.guards = state.guards.record(1, "read_files", {"paths": ["~/a.md"]}, executed=True, succeeded=True)
    Guards().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state, pool=pool))
    state.problem = (FailureKind.STEP_REFUSED, "read_urls_html was refused by the sandbox policy: no usable host name")
    state.failed_calls[("read_urls_html", "h")] = 3
    lost = an_answer(loop, "To read a file, use read_files.", state, pool=pool)
    assert RestsOnRecovery().on_answer(lost) == AnswerWith((1,), "held_data_after_detour")
    # What went wrong is what the request's words asked for (the page): no detour, the refusal is the outcome.
    state.worded = ("read_urls_html",)
    assert RestsOnRecovery().on_answer(lost) == End(*state.problem)
    state.worded = ("read_files",)
    # Asked to delete, the data it read is no answer: the refusal is.
    assert RestsOnRecovery().on_answer(an_answer(Loop(), "To read a file, use read_files.", state, pool=["read_files", "delete_files"],
                                                 request="delete ~/a.md")) == End(*state.problem)
    # Gone wrong before the model was told of the data (a read of another file failed): the data may not be what was asked.
    before = TurnState(guards=TurnGuards(), problem=(FailureKind.STEP_FAILED, "read_files failed"))
    before.failed_calls[("read_files", "b")] = 1
    ran(a_step(loop, "read_files", {"paths": ["~/a.md"]}, before), {"ok": True, "content": "alpha"})
    before.guards = before.guards.record(1, "read_files", {"paths": ["~/a.md"]}, executed=True, succeeded=True)
    Guards().on_call(a_step(loop, "read_files", {"paths": ["~/a.md"]}, before, pool=pool))
    assert before.answer_from == (1,)
    assert RestsOnRecovery().on_answer(an_answer(loop, "To read a file, use read_files.", before, pool=pool)) == End(*before.problem)


def held_after_a_failed_slice(loop: Loop, exact: object = None, worded: tuple[str, ...] = ("read_files",)) -> TurnState:
    """Read, a slice that failed, the same read again (intercepted), then a page that was refused."""
    pool = ["read_files", "extract_lines", "read_urls_html"]
    state = TurnState(guards=TurnGuards(), exact=exact, worded=worded)
    ran(a_step(loop, "read_files", {"paths": ["~/spesa.txt"]}, state), {"ok": True, "content": "pane\nlatte"})
    state.guards = state.guards.record(1, "read_files", {"paths": ["~/spesa.txt"]}, executed=True, succeeded=True)
    state.problem = (FailureKind.STEP_FAILED, "extract_lines failed: no lines given")
    state.failed_calls[("extract_lines", "h")] = 2
    state.step = 2
    Guards().on_call(a_step(loop, "read_files", {"paths": ["~/spesa.txt"]}, state, pool=pool))
    state.failed_calls[("read_urls_html", "h")] = 4
    return state


def test_a_side_step_that_failed_before_the_data_was_read_again_does_not_keep_that_data_from_answering() -> None:
    """The 1.5B read a shopping list, tried a slice that failed, read the list again (told the data was there),
    then asked for a made-up page, which was refused: the turn ended refused though step 1 held the list."""
    loop = Loop({"read_files": executor(), "extract_lines": executor(), "read_urls_html": executor()})
    pool = ["read_files", "extract_lines", "read_urls_html"]
    state = held_after_a_failed_slice(loop)
    lost = an_answer(loop, "I could not read the page.", state, pool=pool)
    assert state.told_clean_at == 3 and RestsOnRecovery().on_answer(lost) == AnswerWith((1,), "held_data_after_detour")
    # The slice is what the request's words ask for ("the last lines"): the held file is no answer.
    worded = held_after_a_failed_slice(loop, worded=("extract_lines",))
    assert not worded.told_clean_at
    assert RestsOnRecovery().on_answer(an_answer(loop, "I could not read the page.", worded, pool=pool)) == End(*worded.problem)
    # "leggi" ranks the file and the page alike: the page that was refused is no part of what the words ask,
    # the file they ask for is held.
    tie = held_after_a_failed_slice(loop, worded=("read_files", "read_urls_html"))
    assert RestsOnRecovery().on_answer(an_answer(loop, "I could not read the page.", tie, pool=pool)) == AnswerWith((1,), "held_data_after_detour")
    loop.online.config.held_data_words_served = False
    assert RestsOnRecovery().on_answer(an_answer(loop, "I could not read the page.", tie, pool=pool)) == End(*tie.problem)
    loop.online.config.held_data_words_served = True
    exact = held_after_a_failed_slice(loop, exact=("last", 3))
    assert not exact.told_clean_at
    assert RestsOnRecovery().on_answer(an_answer(loop, "I could not read the page.", exact, pool=pool)) == End(*exact.problem)
    off = Loop({"read_files": executor(), "extract_lines": executor(), "read_urls_html": executor()})
    off.online.config.held_data_after_failed_step = False
    old = held_after_a_failed_slice(off)
    assert not old.told_clean_at
    assert RestsOnRecovery().on_answer(an_answer(off, "I could not read the page.", old, pool=pool)) == End(*old.problem)


def test_an_answer_that_does_not_hold_up_is_sent_back_once_then_is_unfounded() -> None:
    loop, state = Loop(), TurnState()
    ran(a_step(loop, "read_files", {"paths": ["~/notes"]}, state),
        {"ok": True, "entries": [{"path": "/home/u/notes/a.txt", "size": 120}, {"path": "/home/u/notes/b.md", "size": 3000}]})
    rule = Grounded()
    assert rule.on_conclusion(an_answer(loop, "There are 2 files: a.txt and b.md.", state, request="list ~/notes")) is None
    bad = "There are 3 files: a.txt, c.txt and b.md."
    sent = rule.on_conclusion(an_answer(loop, bad, state, request="list ~/notes"))
    assert isinstance(sent, SendBack) and state.grounding_repaired
    assert loop.events[-1][0] == "AnswerUngrounded" and loop.events[-1][1]["unmatched"] == ["c.txt", "3"]
    again = rule.on_conclusion(an_answer(loop, bad, state, request="list ~/notes"))
    assert isinstance(again, Unfounded) and not isinstance(again, AnswerInstead)


# Before the model is asked -----------------------------------------------------------

def a_round(loop: Loop, state: TurnState, pool: list[str] | None = None) -> Round:
    return Round(loop, SimpleNamespace(id="t"), state, TurnRequest(text="read ~/a.md"), pool if pool is not None else ["read_files"])


def test_a_request_that_changes_nothing_is_asked_for_words_once_its_data_is_a_single_value() -> None:
    loop, state = Loop(), TurnState()
    assert AnswerOnly().on_ask(a_round(loop, state)) is None  # the model has taken no step of its own yet
    ran(a_step(loop, "read_files", {"paths": ["~/a.md"]}, state), {"ok": True, "content": "alpha"})
    state.model_steps = 1
    assert AnswerOnly().on_ask(a_round(loop, state)) == WordsOnly()
    assert AnswerOnly().on_ask(a_round(loop, state, ["read_files", "delete_files"])) is None  # a request that acts keeps its tools


def test_after_a_problem_the_next_round_climbs_one_tier_once() -> None:
    loop, state = Loop(), TurnState(tier="fast", problem=(FailureKind.STEP_FAILED, "read_files failed"))
    loop.online = SimpleNamespace(config=SimpleNamespace(tier_above=lambda tier: {"fast": "middle", "middle": "wise"}.get(tier)))
    assert ClimbTier().on_ask(a_round(loop, state)) is None and state.tier == "middle"
    assert loop.events == [("TierEscalated", {"round": 0, "from_tier": "fast", "to_tier": "middle", "reason": "read_files failed"})]
    ClimbTier().on_ask(a_round(loop, state))
    assert state.tier == "middle" and len(loop.events) == 1


def test_an_answer_in_the_words_of_the_request_is_not_an_echo_of_the_instructions() -> None:
    # The 1.5B's right answer was sent back as "instructions echoed": it said the request's words,
    # which the loop's own "answer now" message quotes.
    from metnos.runtime.turn.prompt import answer_from_results
    loop, state = Loop(), TurnState()
    request = "What is the headline on http://127.0.0.1:45017/news.html?"
    answer = an_answer(loop, 'The headline on http://127.0.0.1:45017/news.html is "The bridge reopens".', state, request=request)
    answer.messages.extend([UserMessage("step 1 returned ..."), UserMessage(answer_from_results(request))])
    assert AnswerForm().on_answer(answer) is None
    echo = an_answer(loop, "Using these results, answer my request in plain text with the actual values from them.", state,
                     request=request)
    echo.messages.extend([UserMessage("step 1 returned ..."), UserMessage(answer_from_results(request))])
    assert isinstance(AnswerForm().on_answer(echo), SendBack)


def test_a_list_no_offered_tool_takes_is_answered_from_at_once() -> None:
    takes = {"type": "object", "properties": {"from_step": {"type": "integer"}, "field": {"type": "string"}}}
    loop = Loop({"read_events": executor(), "sort_entries": executor(schema=takes)})
    state = TurnState()
    ran(a_step(loop, "read_events", {"paths": ["~/a.ics"]}, state), {"ok": True, "entries": [{"summary": "Review"}]})
    state.model_steps = 1
    # Offered the read alone: nothing works on its list, the answer says it.
    assert AnswerOnly().on_ask(a_round(loop, state, ["read_events"])) == WordsOnly()
    # Offered a tool that takes the list: the chain may go on.
    assert AnswerOnly().on_ask(a_round(loop, state, ["read_events", "sort_entries"])) is None



def _seed_catalogue() -> Any:
    from bench.shortlist_recall import catalogue
    from metnos.runtime.step.prefilter import PrefilterIndex
    entries = catalogue()
    found = {e.name: SimpleNamespace(entry=e) for e in entries}
    return SimpleNamespace(index=PrefilterIndex(entries), executors=found, builtins={}, get=found.get)


@pytest.mark.parametrize(("request_text", "tried", "open_after"), [
    # The 1.5B deleted the files and answered; the message was never sent.
    ("Delete the .tmp files in ~/Downloads and then send a message saying it is done", ["delete_files"], ["send_messages"]),
    ("Delete the .tmp files in ~/Downloads and then send a message saying it is done", ["delete_files", "send_messages"], []),
    # "delete" meets delete_files and delete_events: one action, done by either, offered or not.
    ("delete precious.txt", ["delete_files"], []),
    # "add up" is no append: only the verb of an executor's name counts.
    ("Add up the amount column of ~/receipts/dinner.csv and send the total to my brother", ["send_messages"], []),
    ("Add up the amount column of ~/receipts/dinner.csv and send the total to my brother", ["read_files"], ["send_messages"]),
])
def test_the_actions_a_request_names_stay_open_until_each_was_tried(request_text: str, tried: list[str], open_after: list[str]) -> None:
    from metnos.runtime.turn.rules.answers import open_asks
    catalogue = _seed_catalogue()
    loop = SimpleNamespace(catalogue=catalogue)
    state = TurnState()
    state.executed = {i + 1: (name, "1") for i, name in enumerate(tried)}
    pool = ["find_files", "read_files", "delete_events", "send_messages", "write_files"]
    assert open_asks(loop, state, request_text, pool) == open_after
    state.scheduled = True
    assert open_asks(loop, state, request_text, pool) == []


@pytest.mark.parametrize(("args", "refused"), [
    ({"paths": ["~/camera/a.jpg"], "dest_dir": "~/camera/2024"}, ["~/camera/2024"]),
    ({"paths": ["~/camera/a.jpg"], "dest_dir": "~/photos/2024/"}, []),
    ({"paths": ["~/camera/a.jpg"], "dest_dir": f"{HOME}/photos/2024/trip"}, []),  # inside it, written out whole
    ({"paths": ["~/camera/a.jpg"], "dest_dir": "~/photos/2024b"}, ["~/photos/2024b"]),
    ({"moves": [{"src": "~/camera/a.jpg", "dst": "~/photos/2024"}]}, ["~/photos/2024"]),  # a rename onto the folder's name
    ({"moves": [{"src": "~/camera/a.jpg", "dst": "~/photos/2024/a.jpg"}]}, []),
])
def test_a_move_goes_into_the_folder_the_request_names(args: dict[str, Any], refused: list[str]) -> None:
    from metnos.runtime.turn.rules.calls import RequestedDestination
    loop = Loop({"move_files": executor(side_effects=True)})
    step = a_step(loop, "move_files", args, text="Move the .jpg files in ~/camera into ~/photos/2024.")
    verdict = RequestedDestination().on_call(step)
    rejected = [f for kind, f in loop.events if kind == "StepRejected"]
    assert (verdict is not None) == bool(refused) and [r["error"]["elsewhere"] for r in rejected] == ([refused] if refused else [])
    # A request that names no folder to go to puts no bound on where.
    assert RequestedDestination().on_call(a_step(loop, "move_files", args, text="tidy up ~/camera")) is None


def test_another_action_that_went_through_after_the_named_one_failed_does_not_answer_it() -> None:
    # The 0.5B, asked to move two files, failed the move (no dest_dir), deleted them, and the turn said answered.
    from metnos.runtime.turn.rules.answers import answer_from_data, open_asks
    from metnos.runtime.turn.turn_state import AnswerFromData
    request = "Move every .txt file in ~/notes/archive into ~/notes/old."
    pool = ["find_files", "move_files", "delete_files", "write_files"]
    loop = Loop()
    loop.catalogue = _seed_catalogue()
    listed = {"ok": True, "entries": [{"path": "/h/notes/archive/one.txt", "name": "one.txt"}]}

    def deleted_after_a_failed_move() -> TurnState:
        state = TurnState()
        state.executed = {1: ("find_files", "1"), 2: ("move_files", "1"), 3: ("delete_files", "1")}
        state.observations = {1: listed, 2: {"ok": False, "error": "paths or entries need a dest_dir"},
                              3: {"ok": True, "entries": [{"path": "/h/notes/archive/one.txt", "deleted": True}]}}
        state.acted, state.acted_steps = True, [3]
        return state

    state = deleted_after_a_failed_move()
    assert open_asks(loop, state, request, pool) == []
    assert open_asks(loop, state, request, pool, done=True) == ["move_files"]
    # The move's own failure is the outcome, not a reminder (its arguments were what went wrong).
    ended = ActionTaken().on_answer(an_answer(loop, "Moved.", state, pool=pool, request=request))
    assert isinstance(ended, End) and ended.kind is FailureKind.STEP_FAILED and "dest_dir" in ended.detail, ended
    with pytest.raises(EndTurn) as raised:
        answer_from_data(loop, None, deleted_after_a_failed_move(), TurnRequest(text=request), pool, AnswerFromData((1,)))
    assert raised.value.kind is FailureKind.STEP_FAILED and "dest_dir" in raised.value.detail
    # Never tried, it is reminded of once, then the turn fails for it.
    untried = deleted_after_a_failed_move()
    del untried.executed[2], untried.observations[2]
    reminded = ActionTaken().on_answer(an_answer(loop, "Moved.", untried, pool=pool, request=request))
    assert isinstance(reminded, SendBack) and "move_files" in reminded.messages[1].text
    assert ActionTaken().on_answer(an_answer(loop, "Moved.", untried, pool=pool, request=request)) == End(FailureKind.ACTION_NOT_TAKEN, "move_files")
    # The move done at last answers it.
    state.executed[4], state.observations[4] = ("move_files", "1"), {"ok": True, "entries": [{"path": "/h/notes/old/one.txt"}]}
    assert open_asks(loop, state, request, pool, done=True) == []


def test_an_action_turn_answered_from_its_data_says_what_the_action_did_not_what_it_read() -> None:
    # The 1.5B read a file, scheduled a message, read the file again twice: the answer was the file.
    from metnos.runtime.turn.rules.answers import answer_from_data
    from metnos.runtime.turn.turn_state import AnswerFromData
    loop = Loop({"read_files": executor(), "delete_files": executor(side_effects=True)})
    state = TurnState()
    state.observations = {1: {"ok": True, "entries": [{"path": "/h/a.md", "content": "the file's own words"}]},
                          2: {"ok": True, "deleted": ["/h/a.md"]}}
    state.acted, state.acted_steps = True, [2]
    request = TurnRequest(text="read ~/a.md, then delete it")
    answer = answer_from_data(loop, None, state, request, ["read_files", "delete_files"], AnswerFromData((1,)))
    assert "/h/a.md" in answer and "the file's own words" not in answer, answer
    state.acted, state.acted_steps = False, []
    request = TurnRequest(text="read ~/a.md")
    assert "the file's own words" in answer_from_data(loop, None, state, request, ["read_files"], AnswerFromData((1,)))


def test_a_question_answered_in_words_is_not_held_to_the_action_it_was_offered() -> None:
    # "What is the message of the last commit?": offered the commit tool on a shared word, the
    # 1.5B read the log and answered right, and the turn failed for not committing.
    loop, pool = Loop(), ["read_files", "delete_files"]
    question = an_answer(loop, "The oldest one is a.txt.", TurnState(), pool=pool, request="which is the oldest file in ~/old?")
    assert ActionTaken().on_answer(question) is None
    order = an_answer(loop, "The oldest one is a.txt.", TurnState(), pool=pool, request="delete the oldest file in ~/old")
    assert isinstance(ActionTaken().on_answer(order), SendBack)


def test_a_question_answered_from_its_data_is_not_failed_for_the_action_it_was_offered() -> None:
    from metnos.runtime.turn.rules.answers import answer_from_data
    from metnos.runtime.turn.turn_state import AnswerFromData
    loop, pool = Loop(), ["read_files", "delete_files"]
    state = TurnState()
    state.observations = {1: {"ok": True, "entries": [{"path": "/h/old/a.txt", "content": "alpha"}]}}
    answer = answer_from_data(loop, None, state, TurnRequest(text="what does the file in ~/old say?"), pool, AnswerFromData((1,)))
    assert "alpha" in answer
    with pytest.raises(EndTurn):
        answer_from_data(loop, None, state, TurnRequest(text="delete the file in ~/old"), pool, AnswerFromData((1,)))


def test_a_schedule_that_carries_what_a_step_read_now_is_refused_with_how_to_read_at_each_firing() -> None:
    from domain.provenance import Provenance
    from metnos.runtime.step.schedule_tools import SCHEDULE_TOOL
    from metnos.runtime.turn.rules.answers import ScheduleMade
    loop = Loop()
    args = {"executor": "send_messages", "cron": "0 17 * * 5",
            "args": {"messages": [{"to_user": "me", "body": "Quarterly review in room 4."}]}}
    baked = a_step(loop, SCHEDULE_TOOL, args, text="every Friday at 17:00 send me the first line of ~/notes/m.md")
    baked.provenance = {"args.messages.0.to_user": Provenance("request", span=(30, 32)),
                        "args.messages.0.body": Provenance("step", step=1, field="content", source="named_file")}
    verdict = ScheduleMade().on_resolved(baked)
    rejected = [f for kind, f in loop.events if kind == "StepRejected"]
    assert verdict is not None and rejected and rejected[0]["error"]["argument"] == "args.messages.0.body", rejected
    assert '"chain"' in rejected[0]["observation"]["hint"]
    # Words of the request itself, or a chain that reads at each firing, are what a schedule should carry.
    said = a_step(loop, SCHEDULE_TOOL, args, text="every Friday at 17:00 send me 'Quarterly review in room 4.'")
    said.provenance = {"args.messages.0.body": Provenance("request", span=(30, 58))}
    assert ScheduleMade().on_resolved(said) is None


def test_a_schedule_that_carries_a_line_read_now_inside_words_of_its_own_is_refused() -> None:
    # The 1.5B scheduled "The first line of the meeting is: <the line read today>" to be sent every Friday:
    # traced whole, the body is the model's own text; the line inside it is what the file said today.
    from domain.provenance import Provenance
    from metnos.runtime.step.schedule_tools import SCHEDULE_TOOL
    from metnos.runtime.turn.rules.answers import ScheduleMade
    loop = Loop()
    loop.online.config.schedule_reads_named_sources = False  # the check of the schedule's sources: the test below
    request = "every Friday at 17:00 send me the first line of ~/notes/meeting.md"

    def schedule(body: str, *, text: str = request) -> Step:
        state = TurnState()
        state.step = 2
        state.executed = {1: ("read_files", "1.0.0"), 2: ("extract_lines", "1.0.0")}
        state.observations = {1: {"ok": True, "entries": [{"path": "/h/notes/meeting.md",
                                                           "content": "Quarterly review moved to room B12.\nBring the figures."}]},
                              2: {"ok": True, "entries": [{"line": 1, "text": "Quarterly review moved to room B12."}]}}
        state.sources = {1: "named_file", 2: "named_file"}
        step = a_step(loop, SCHEDULE_TOOL, {"executor": "send_messages", "cron": "0 17 * * 5",
                                            "args": {"messages": [{"to_user": "me", "body": body}]}}, state, text=text)
        step.provenance = {"args.messages.0.body": Provenance("model"), "cron": Provenance("model")}  # as traced whole
        return step

    baked = schedule("The first line of the meeting is: Quarterly review moved to room B12.")
    assert ScheduleMade().on_resolved(baked) is not None
    rejected = [f for kind, f in loop.events if kind == "StepRejected"]
    assert rejected and rejected[-1]["error"]["argument"] == "args.messages.0.body", rejected
    assert rejected[-1]["error"]["origin"]["source"] == "named_file" and '"chain"' in rejected[-1]["observation"]["hint"]
    # Words of the model's own, or the line as the request itself says it, are not a copy of a read.
    assert ScheduleMade().on_resolved(schedule("Time to look at the meeting notes.")) is None
    assert ScheduleMade().on_resolved(schedule("Quarterly review moved to room B12.", text="every Friday send me "
                                               "'Quarterly review moved to room B12.' and read ~/notes/meeting.md")) is None
    # Turns recorded before the setting ran without it.
    loop.online.config.schedule_carries_reads = False
    assert ScheduleMade().on_resolved(schedule("The first line of the meeting is: Quarterly review moved to room B12.")) is None


def test_a_schedule_that_never_reads_what_the_request_names_is_refused() -> None:
    from domain.provenance import Provenance
    from metnos.runtime.step.schedule_tools import SCHEDULE_TOOL
    from metnos.runtime.turn.rules.answers import ScheduleMade
    loop = Loop({"read_files": executor(), "find_files": executor()})
    request = "every Friday at 17:00 send me the first line of ~/notes/plan.md"

    def schedule(args: dict, *, text: str = request) -> Step:
        step = a_step(loop, SCHEDULE_TOOL, {"cron": "0 17 * * 5", **args}, TurnState(), text=text)
        step.provenance = {"cron": Provenance("model")}  # as traced: nothing read now is in it
        return step

    own_words = {"executor": "send_messages", "args": {"messages": [{"to_user": "me", "body": "Weekly reminder"}]}}
    assert ScheduleMade().on_resolved(schedule(own_words)) is not None
    rejected = [f for kind, f in loop.events if kind == "StepRejected"]
    assert rejected[-1]["error"]["source"] == "~/notes/plan.md" and "read_files of ~/notes/plan.md" in rejected[-1]["observation"]["hint"]
    chain = {"chain": [{"executor": "read_files", "args": {"paths": ["~/notes/plan.md"]}},
                       {"executor": "send_messages", "args": {"messages": [{"to_user": "me", "body": "{{step1.content}}"}]}}]}
    assert ScheduleMade().on_resolved(schedule(chain)) is None
    home_expanded = {"executor": "read_files", "args": {"paths": ["/home/me/notes/plan.md"]}}
    assert ScheduleMade().on_resolved(schedule(home_expanded)) is None
    # A request that names nothing to read, or a folder it moves things into, asks no read of it.
    assert ScheduleMade().on_resolved(schedule(own_words, text="every Monday at 9:00 remind me to water the plants")) is None
    move = {"executor": "move_files", "args": {"moves": [{"src": "~/Downloads/a.pdf", "dst": "~/Documents/a.pdf"}]}}
    assert ScheduleMade().on_resolved(schedule(move, text="every day move ~/Downloads/a.pdf into ~/Documents")) is None
    # A source named in a step before the recurrence's is read now; the same source inside it is read each time.
    wipe = {"executor": "delete_files", "args": {"paths": ["~/Backups"], "recursive": True}}
    assert ScheduleMade().on_resolved(schedule(wipe, text="read ~/notes/plan.md, then every night at 3 delete ~/Backups")) is None
    assert ScheduleMade().on_resolved(schedule(wipe, text="leggi ~/notes/plan.md; poi ogni notte alle 3 cancella ~/Backups")) is None
    assert ScheduleMade().on_resolved(schedule(own_words, text="every night at 3 read ~/notes/plan.md, then send it to me")) is not None
    loop.online.config.schedule_reads_named_sources = False
    assert ScheduleMade().on_resolved(schedule(own_words)) is None


def test_data_made_the_answer_is_what_the_request_words_ask_for_or_the_turn_fails_saying_so() -> None:
    from metnos.runtime.turn.grounding import exact_ask
    from metnos.runtime.turn.rules.answers import answer_from_data
    from metnos.runtime.turn.turn_state import AnswerFromData
    loop = Loop({"find_files": executor(), "get_urls": executor(), "extract_lines": executor(), "run_commands": executor()})
    request = TurnRequest(text="what changed in my repo ~/code since the last commit?")

    def state_with(worded: tuple[str, ...], executor_of_step: str) -> TurnState:
        state = TurnState()
        state.worded = worded
        state.executed = {1: (executor_of_step, "1.0.0")}
        state.observations = {1: {"ok": True, "entries": [{"path": "/h/code/a.txt"}], "content": "the page"}}
        return state

    # A listing, when the words ask for a command that never ran: the turn fails, naming both.
    with pytest.raises(EndTurn) as held:
        answer_from_data(loop, None, state_with(("run_commands",), "find_files"), request, ["find_files"], AnswerFromData((1,)))
    assert held.value.kind is FailureKind.UNUSABLE_ANSWER and "run_commands" in held.value.detail and "find_files" in held.value.detail
    # What the words ask for gave it; a page read by another reader of pages; data worked out; no word met a tag.
    assert answer_from_data(loop, None, state_with(("find_files",), "find_files"), request, ["find_files"], AnswerFromData((1,)))
    assert answer_from_data(loop, None, state_with(("read_urls_html",), "get_urls"), request, ["get_urls"], AnswerFromData((1,)))
    # An exact ask is left to the rule on exactness, which works it out from the data (a read is its input).
    first = TurnRequest(text="what is the first item of ~/todo.md?")
    ordered = state_with(("extract_lines",), "read_files")
    ordered.exact = exact_ask(first.text)
    assert answer_from_data(loop, None, ordered, first, ["read_files"], AnswerFromData((1,)))
    # A slice the request does not ask for is not its answer, whatever it was cut from.
    sliced = state_with(("read_urls_html",), "extract_lines")
    sliced.sources = {1: "web"}
    with pytest.raises(EndTurn):
        answer_from_data(loop, None, sliced, TurnRequest(text="until when is the room open, says the page?"), ["extract_lines"], AnswerFromData((1,)))
    assert answer_from_data(loop, None, state_with((), "find_files"), request, ["find_files"], AnswerFromData((1,)))
    # Under the setting off (turns recorded before it), the data is the answer as it was.
    loop.online.config.data_asked_for = False
    assert answer_from_data(loop, None, state_with(("run_commands",), "find_files"), request, ["find_files"], AnswerFromData((1,)))
