"""The loop of one turn (seeds/002 ch. 2), recording every decision as an event.

The loop is deterministic given its ports: the same replies, observations,
approvals, clock readings and ids give the same events. That is what the
replayer checks, by running this very code with ports fed from the log.

Order of the checks on a proposed call, as the spec gives it: the guards
(caps, duplicate read), the executor's existence, the pipeline shape, step
references (from_step, {{stepN.field}}), the argument schema, the sandbox
policy, then the vaglio (guard and judge) and, where it asks, the user.
Each refusal becomes an observation the model can correct, with a hint. A
step's events (and the invocation's) are committed together, in one
transaction.

How a turn ends is honest (docs/turns.md, "Outcomes"):

* ``answered`` only with text that reads as an answer (:mod:`metnos.runtime.turn.answers`):
  an empty reply, a tool name, raw tool output, a call written as text or a
  stub is sent back once with the reason, and a second one fails the turn.
* A step that failed (crashed, timed out, refused by a fence or the user,
  rejected for its shape, schema or arguments) leaves the turn failed,
  refused or needs_input unless a later step succeeded and the answer uses
  what it produced.
* Unreadable or schema-violating arguments get one correction round; a
  second in a row ends the turn.
* A call that needs a data source it lacks is remediated (seeds/002 ch.
  4-ter): the prerequisite runs as a step of its own, then the call is
  retried once with the prerequisite's list (``from_step``).
* A read intercepted as a duplicate and proposed again ends the turn with
  an answer made from the data the earlier step already holds.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from domain.turn import Turn
from metnos.canonical import canonical_hash
from metnos.runtime.cascade.player import PlanPlayer
from metnos.runtime.cascade.template import TemplateGap
from metnos.mechanisms.invocation.errors import InvocationError
from metnos.mechanisms.llm.errors import LLMError, ProviderUnreachable
from metnos.mechanisms.llm.messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolResult, UserMessage
from metnos.settings.llm_tiers import ROLE_TIERS
from metnos.runtime.mnestome.boost import apply_boost
from metnos.mechanisms.sandbox import autonomy
from metnos.mechanisms.sandbox.policy import path_arguments
from metnos.runtime.turn.answers import asks_for_a_figure, is_a_figure, REASONS, answer_problem, figures_from, grounded_in
from metnos.runtime.turn.call_schema import planner_constraint
from metnos.runtime.turn.catalogue import SCRATCHPAD_READ, TurnCatalogue
from metnos.runtime.turn.completion import complete_arguments, complete_paths, without_blank_optionals
from metnos.runtime.turn.errors import TurnError
from metnos.runtime.turn.filler import FILLER_PROMPT, Filler, FillerFailed, has_fillers
from metnos.runtime.turn.failures import FailureKind, step_failure_words, turn_failure, unknown_executor
from metnos.runtime.turn.grounding import StepData, check_answer, exact_ask, repair_prompt, working_out_call
from metnos.runtime.turn.guards import DUPLICATE_READ, TurnGuards, targets_of
from metnos.runtime.turn.interrupts import InterruptGate, Interrupted
from metnos.runtime.turn.intent_model import INTENT_PROMPT, extract_intent
from metnos.runtime.turn.hybrid import OnlineDriver, PlanFailed
from metnos.runtime.turn.judge import JUDGE_PROMPT, LLMJudge
from metnos.settings.runtime import RuntimeConfig
from metnos.runtime.turn.piping import FROM_STEP, resolve_args, placeholders_in
from metnos.runtime.turn.ports import TurnPorts
from metnos.runtime.turn.prompt import ANSWER_NOW, FINAL_ONLY, PLACEHOLDER_CORRECTION, PLANNER_PROMPT, act_reminder, answer_correction, answer_from_results
from metnos.runtime.turn.quarantined import record_quarantined
from metnos.runtime.turn.remediation import RemediationAction, RemediationContext, plan_remediation
from metnos.runtime.turn.shape import NEEDS_DATA_SOURCE, PIPELINE_ALREADY_CLOSED
from metnos.runtime.turn.shortlist import complete as complete_shortlist
from metnos.runtime.turn.sources import opening_reads
from metnos.runtime.turn.scratchpad import InMemoryScratchpadStore, scratchpad_read, spill
from metnos.settings.turn import TurnSettings
from metnos.runtime.turn.summariser import SUMMARISER_PROMPT, summarise
from metnos.runtime.turn.shape import ShapeStep, UnknownVerbError, compute_state, next_state, open_actions
from metnos.runtime.turn.vaglio import ALLOW, ASK, DENY, GuardPolicy, vaglio
from metnos.runtime.turn.validation import validate_args

# Steps of its own a request that changes nothing may take before it is asked for
# the answer: a read, then up to two steps on its data (filter, then count).
READ_ONLY_MODEL_STEPS = 3


class Sink(Protocol):
    def commit(self, aggregates: list[Any]) -> None: ...


@dataclass(frozen=True)
class TurnRequest:
    text: str
    actor: str = "user"
    channel: str = "cli"
    mode: str = "local"
    tier: str = "wise"
    autonomy: str = autonomy.DEFAULT
    # [runtime] of config.toml as this turn runs it (RuntimeConfig.to_json()): the mode, hybrid rules, the LLM judge.
    runtime: dict[str, Any] | None = None
    # The home written "~" in the observations the model is shown: None for the policy's; a replay
    # passes the recorded one ("" for a turn recorded before, when they were shown whole).
    home: str | None = None


@dataclass
class TurnOutcome:
    turn_id: str
    status: str  # answered | failed | refused | needs_input | unverified | interrupted
    answer: str | None = None
    failure: dict[str, Any] | None = None
    steps: int = 0
    # Why the mnestome did not learn from this turn, if it did not (the turn is
    # recorded all the same; seeds/002 ch. 11.1: reported, never fatal).
    learning_error: str | None = None
    # Which models answered, in order: {"tier", "role", "model"} (filled from the log by the session).
    models: list[dict[str, str]] = field(default_factory=list)
    # Quarantined executors the request would have been offered, each with why and the command
    # that shows it (metnos/runtime/turn/quarantined.py; filled from the log by the session).
    quarantined: list[dict[str, str]] = field(default_factory=list)

    @property
    def message(self) -> str:
        return self.answer if self.answer is not None else (self.failure or {}).get("message", "")


@dataclass
class _State:
    step: int = 0
    round: int = 0
    corrections: int = 0
    answer_corrections: int = 0
    # Calls in a row whose arguments could not be used (not JSON, off schema).
    argument_errors: int = 0
    # The last step that went wrong, and what succeeded since (an answer must use it).
    problem: tuple[FailureKind, str] | None = None
    since_problem: list[dict[str, Any]] = field(default_factory=list)
    # (executor, targets) of reads already intercepted once as duplicates.
    intercepted: set[tuple[str, frozenset[str]]] = field(default_factory=set)
    # (executor, hash of the proposed arguments) of calls that failed or were refused -> their step.
    failed_calls: dict[tuple[str, str], int] = field(default_factory=dict)
    # Failed calls already proposed once more and intercepted.
    repeated_failures: set[tuple[str, str]] = field(default_factory=set)
    remediating: bool = False
    final_only: bool = False
    pipeline_closed: bool = False
    # Steps the model proposed (opening reads are the turn's own).
    model_steps: int = 0
    # The model, holding data, took a step that did not work on it (a read of its own).
    read_again: bool = False
    # A step with side effects succeeded.
    acted: bool = False
    # The model, in a request that acts, answered before any action ran and was reminded of it.
    reminded_to_act: bool = False
    # The problem, when it is a call refused for its form that would have changed nothing.
    unrun_read: tuple[FailureKind, str] | None = None
    # The request was restated with the results, asking for the answer in words (once a turn).
    asked_for_words: bool = False
    # Steps whose data answers the request, once the model asked for it twice more.
    answer_from: tuple[int, ...] = ()
    # A presentation step (describe, render) that closed a request that changes nothing.
    presented: int | None = None
    guards: TurnGuards = field(default_factory=TurnGuards)
    observations: dict[int, Any] = field(default_factory=dict)
    executed: dict[int, tuple[str, str]] = field(default_factory=dict)
    shape: list[ShapeStep] = field(default_factory=list)
    scratch: InMemoryScratchpadStore = field(default_factory=InMemoryScratchpadStore)
    has_scratch: bool = False
    # What the turn is doing, for the record if a signal stops it there.
    during: str = "between steps"
    # The plan the cascade gave (metnos/cascade), followed until it is done or goes wrong.
    plan: Any = None
    # Online planning (metnos/runtime/turn/hybrid.py): the plan is an online one; its recovery call was spent; a hybrid turn escalated.
    online: bool = False
    recovered: bool = False
    escalated: bool = False
    # The answer was sent back once because it did not hold up against the results (metnos.runtime.turn.grounding).
    grounding_repaired: bool = False
    # ...and it was told to work out an exact ask with a tool: the tools stay offered until a step does.
    working_out: bool = False
    # The exact ask of the request (metnos.runtime.turn.grounding), if it makes one.
    exact: Any = None
    # Metnos proposed the step that works an exact ask out itself (once a turn).
    worked_out_by_runtime: bool = False
    # The tier the proposer asks now, and the failure it last climbed for.
    tier: str = "wise"
    climbed_for: Any = None


class _EndTurn(Exception):
    def __init__(self, kind: FailureKind, detail: str) -> None:
        self.kind = kind
        self.detail = detail


class _AnswerFromData(Exception):
    """The model asked again for data it already has: answer with that data."""

    def __init__(self, steps: tuple[int, ...], reason: str = "duplicate_read_repeated") -> None:
        self.steps = steps
        self.reason = reason


class TurnLoop:
    def __init__(
        self,
        *,
        ports: TurnPorts,
        catalogue: TurnCatalogue,
        settings: TurnSettings,
        policy: GuardPolicy,
        sink: Sink,
        runtime_version: str,
        check_policy: Callable[[Any, dict[str, Any]], None] | None = None,
        observer: Callable[[Any], None] | None = None,
        interrupts: InterruptGate | None = None,
    ) -> None:
        self.ports = ports
        self.catalogue = catalogue
        self.settings = settings
        self.policy = policy
        self.sink = sink
        self.runtime_version = runtime_version
        self.check_policy = check_policy
        self.observer = observer
        # Replay and tests pass none: a gate nobody installed never fires.
        self.interrupts = interrupts or InterruptGate()
        # Set from each turn's [runtime] (recorded on TurnStarted, so replay judges and plans alike); off until then.
        self.judge = LLMJudge(RuntimeConfig().judge)
        self.online = OnlineDriver(self, None)
        self.shown_home = policy.home

        self.tool_names = frozenset(catalogue.executors) | frozenset(catalogue.builtins) | {SCRATCHPAD_READ}

    # Recording -----------------------------------------------------------
    def _record(self, turn: Turn, event_class: type, **fields: Any) -> None:
        turn.record(event_class, at=self.ports.now(), **fields)
        if self.observer is not None:
            self.observer(turn.pending_events[-1])

    def _commit(self, turn: Turn, *others: Any) -> None:
        self.sink.commit([turn, *others])

    # The turn ------------------------------------------------------------
    def run(self, request: TurnRequest) -> TurnOutcome:
        turn_id = self.ports.new_id()
        turn = Turn.start(
            id=turn_id, at=self.ports.now(), text=request.text, actor=request.actor, channel=request.channel,
            mode=request.mode, settings=self.settings.to_json(), runtime_version=self.runtime_version, autonomy=request.autonomy,
            runtime=request.runtime, home=self._shown_home(request),
        )
        self.shown_home = self._shown_home(request)
        self.online = OnlineDriver(self, request.runtime)
        self.judge = LLMJudge(self.online.config.judge, self.online.config.system_prompt("judge", JUDGE_PROMPT))
        if self.observer is not None:
            self.observer(turn.pending_events[-1])
        state = _State(guards=TurnGuards(
            cap_steps=self.settings.cap_steps,
            cap_same_executor=self.settings.cap_same_executor,
            cap_same_vectorial=self.settings.cap_same_vectorial,
            pure=frozenset(n for n in self.catalogue.executors if not self._acts(n)),
        ))
        state.tier = self.online.config.proposer_tier if request.runtime is not None else request.tier
        state.exact = exact_ask(request.text)
        with self.interrupts.deferring():
            try:
                return self._run(turn, state, request)
            except Interrupted as stop:
                return self._interrupted(turn, state, stop)

    def _run(self, turn: Turn, state: _State, request: TurnRequest) -> TurnOutcome:
        self._record(turn, Turn.CatalogueResolved, digest=self.catalogue.digest, entries=self.catalogue.entries)
        # A quarantined executor the request would have been offered is said, never silently missing.
        record_quarantined(lambda cls, **f: self._record(turn, cls, **f), self.catalogue, request.text,
                           level=request.autonomy, pool_size=self.settings.pool_size, offer=self.settings.offer)
        if len(self.catalogue) == 0:
            return self._fail(turn, state, FailureKind.EMPTY_CATALOGUE, "")
        started = time.perf_counter()
        ranking = self.catalogue.index.query(request.text, pool_size=self.settings.pool_size).to_json()
        # Executors strong mnests lead to from what the request matched rank
        # higher (seeds/004); the boost comes through a port and is recorded.
        context = [c["name"] for c in ranking["candidates"] if c.get("score", 0) > 0]
        record = self.ports.mnest_boost(ranking, context)
        if record is not None:
            ranking = apply_boost(ranking, record)
        # What the request names brings its source; side effects it does not ask for are withheld.
        ranking = complete_shortlist(ranking, self.catalogue.index, request.text, self._intent_tools(turn, request),
                                     offer=self.settings.offer, pool_size=self.settings.pool_size)
        self._record(turn, Turn.PrefilterRanked, ranking=ranking, prefilter_ms=_ms(started))
        self._commit(turn)
        state.plan = self._consult_plans(turn, request)
        pool = [c["name"] for c in ranking["candidates"] if self._offered(request, c["name"])]
        messages: list[Message] = [SystemMessage(self.online.config.system_prompt("proposer", PLANNER_PROMPT)), UserMessage(request.text)]
        try:
            why = self.online.starts_online(request) if state.plan is None else None
            if why is not None and request.mode == "hybrid":
                self.online.escalate(turn, state, request, pool, why)
            elif why is not None:
                self.online.propose(turn, state, request, pool)
            elif state.plan is None and self.settings.opening_reads:
                # A plan from the cascade holds its own reads; an online plan proposes its own.
                self._open(turn, state, request, pool, messages)
            while True:
                composed = False
                try:
                    try:
                        answer = self._round(turn, state, request, pool, messages)
                    except _AnswerFromData as found:
                        answer = self._answer_from_data(turn, state, request, pool, found)
                        composed = True
                    if answer is not None and self._not_acted(state, pool):
                        # A plan (online, or the cascade's) that answers a request for an action
                        # without doing it: the loop's own answers were held to this already.
                        raise self._not_done(state, pool)
                except _EndTurn as end:
                    # Every way the local loop fails (a step, a cap, an answer that is none, an
                    # action not taken) is where a hybrid turn escalates, once.
                    if not self.online.escalates_on_failure(request, state, cap=end.kind in (FailureKind.CAP_STEPS, FailureKind.CAP_SAME_EXECUTOR)):
                        raise
                    self.online.escalate(turn, state, request, pool, f"the local loop ended: {end.kind.value} ({end.detail})")
                    continue
                if answer is not None:
                    outcome = self._conclude(turn, state, request, pool, messages, answer, repairable=not composed and state.plan is None)
                    if outcome is not None:
                        return outcome
        except _EndTurn as end:
            return self._fail(turn, state, end.kind, end.detail)
        except PlanFailed as failed:
            if failed.llm_error is not None:
                kind = FailureKind.PROVIDER_UNREACHABLE if isinstance(failed.llm_error, ProviderUnreachable) else FailureKind.BAD_LLM_REPLY
                return self._fail(turn, state, kind, failed.detail)
            if state.problem is not None:
                return self._fail(turn, state, *state.problem)
            return self._fail(turn, state, FailureKind.BAD_LLM_REPLY, failed.detail)

    def _answer_from_data(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], found: _AnswerFromData) -> str:
        """The answer made from the data the steps hold; _EndTurn when that data answers nothing."""
        asked = self._actions_offered(pool)
        if asked and not state.acted:
            # The data is no answer to a request that asked for an action none of whose steps ran.
            raise _EndTurn(FailureKind.ACTION_NOT_TAKEN, " or ".join(asked))
        used = list(found.steps)
        if found.reason != "presentation" and asks_for_a_figure(request.text):
            # The data handed back would read as answered; only a figure worked out from it answers.
            used = [s for s in used if is_a_figure(state.observations.get(s, {}))]
            if not used:
                steps = ", ".join(str(s) for s in found.steps)
                raise _EndTurn(FailureKind.UNUSABLE_ANSWER, f"the figure asked for was never worked out from the data of step {steps}")
        answer = compose_answer([state.observations.get(s, {}) for s in used])
        self._record(turn, Turn.AnswerComposed, from_steps=used, reason=found.reason)
        return answer

    def _intent_tools(self, turn: Turn, request: TurnRequest) -> tuple[str, ...]:
        """The executors the intent extractor names, when ``[runtime] intent = "model"``."""
        if self.online.config.intent != "model":
            return ()
        tier = ROLE_TIERS["intent"]
        executors = [(e.name, e.summary) for e in self.catalogue.index.entries if e.name not in self.catalogue.builtins]
        found = extract_intent(lambda cls, **f: self._record(turn, cls, **f), self.ports.ask_llm, tier=tier, request_text=request.text,
                               executors=executors, system_prompt=self.online.config.system_prompt("intent", INTENT_PROMPT))
        self._record(turn, Turn.IntentExtracted, tools=list(found.tools), tier=tier, model=found.model, problem=found.problem)
        return found.tools

    def _open(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], messages: list[Message]) -> None:
        """Read what the request names before the model is asked (metnos.runtime.turn.sources).
        Each read is a step like any other; one that fails (a file that does not
        exist yet) is recorded, left out of the conversation, and is not the
        turn's problem: the request may be about to create it."""
        for n, read in enumerate(opening_reads(request.text, self.catalogue.executors), 1):
            state.step += 1
            call = ToolCall(id=f"opening-{n}", name=read.executor, arguments=dict(read.args))
            problem, since = state.problem, list(state.since_problem)
            observation, others = self._step(turn, state, request, pool, call, "opening_read")
            self._commit(turn, *others)
            if observation.get("ok") is False:
                state.problem, state.since_problem = problem, since
                continue
            messages.append(AssistantMessage(text="", tool_calls=(call,)))
            messages.append(ToolResult(call_id=call.id, name=call.name, content=_content(observation, self.shown_home)))
            self.interrupts.checkpoint()

    def _shown_home(self, request: TurnRequest) -> str:
        return self.policy.home if request.home is None else request.home

    def _conclude(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], messages: list[Message], answer: str,
                  *, repairable: bool) -> TurnOutcome | None:
        """``answered`` only for an answer that holds up against the turn's results
        (metnos.runtime.turn.grounding); one that does not is sent back to the model once
        (None: the loop goes on), then ends the turn unverified."""
        steps = [StepData(self._executor_of(state, n), _worked_out(self._executor_of(state, n)), state.observations[n])
                 for n in self._successes(state)]
        grounding = check_answer(answer, request=request.text, steps=steps, home=self.shown_home)
        if grounding.holds:
            return self._answered(turn, state, answer)
        self._record(turn, Turn.AnswerUngrounded, round=state.round, text=answer[:2000],
                     unmatched=list(grounding.unmatched), exactness=grounding.exactness)
        if repairable and not state.grounding_repaired:
            state.grounding_repaired = True
            hint = None
            ask = state.exact
            if grounding.exactness and ask is not None and steps:
                state.working_out = True
                offered = self._working_out_tools()
                last = self._successes(state)[-1]
                hint = working_out_call(ask, offered, last, textual=_textual(state.observations[last]))
            messages.append(AssistantMessage(text=answer))
            messages.append(UserMessage(repair_prompt(grounding, hint)))
            self._commit(turn)
            return None
        if grounding.exactness and not state.worked_out_by_runtime:
            worked = self._work_out(turn, state, request, pool)
            if worked is not None:
                return self._conclude(turn, state, request, pool, messages, worked, repairable=False)
        if self.online.escalates_on_failure(request, state, cap=False):
            # A hybrid turn's local answer that does not hold up is a local failure like any other.
            self.online.escalate(turn, state, request, pool, f"the local answer did not hold up: {grounding.summary()}")
            return None
        failure = turn_failure(FailureKind.UNVERIFIED_ANSWER, grounding.summary())
        self._record(turn, Turn.TurnFailed, kind=failure.kind.value, final_kind=failure.final_kind, message=failure.message,
                     steps=state.step, status=failure.status)
        self._commit(turn)
        return TurnOutcome(str(turn.id), failure.status, answer=answer,
                           failure={**failure.to_json(), **grounding.to_json()}, steps=state.step)

    def _work_out(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str]) -> str | None:
        """The exact ask the answers missed, worked out by a step Metnos proposes itself
        (the call the tool's own arguments give, on the last good step's data), and the
        answer composed from its result; None when no offered tool does it or it failed."""
        state.worked_out_by_runtime = True
        ask = state.exact
        good = self._successes(state)
        if ask is None or not good:
            return None
        offered = self._working_out_tools()
        proposed = working_out_call(ask, offered, good[-1], textual=_textual(state.observations[good[-1]]))
        if proposed is None:
            return None
        state.step += 1
        call = ToolCall(id="working-out", name=proposed["name"], arguments=proposed["arguments"])
        observation, others = self._step(turn, state, request, pool, call, "working_out")
        self._commit(turn, *others)
        if observation.get("ok") is False:
            return None
        self._record(turn, Turn.AnswerComposed, from_steps=[state.step], reason="exact_ask")
        return _listing(observation, self.shown_home)

    def _working_out_tools(self) -> dict[str, set[str]]:
        """Every executor without side effects, by its argument names: working an exact ask
        out changes nothing, so it is not bound to the shortlist the model was offered."""
        pure = sorted(n for n in self.catalogue.executors if not self._acts(n))
        return {t.name: set(t.parameters.get("properties", {})) for t in self.catalogue.tools(pure, with_scratchpad=False)}

    @staticmethod
    def _executor_of(state: _State, step: int) -> str:
        return state.executed.get(step, ("", ""))[0]

    def _answered(self, turn: Turn, state: _State, answer: str) -> TurnOutcome:
        self._record(turn, Turn.TurnAnswered, text=answer, steps=state.step)
        self._commit(turn)
        return TurnOutcome(str(turn.id), "answered", answer=answer, steps=state.step)

    def _interrupted(self, turn: Turn, state: _State, stop: Interrupted) -> TurnOutcome:
        # Whatever the turn had recorded since its last commit is committed
        # with the close: the step proposed, the approval asked, the model asked.
        self._record(turn, Turn.TurnInterrupted, signal=stop.signal, step=state.step, during=state.during)
        self._commit(turn)
        message = f"interrupted by {stop.signal} {state.during}, at step {state.step}"
        return TurnOutcome(str(turn.id), "interrupted", failure={"kind": "interrupted", "signal": stop.signal, "message": message}, steps=state.step)

    def _fail(self, turn: Turn, state: _State, kind: FailureKind, detail: str) -> TurnOutcome:
        failure = turn_failure(kind, detail)
        self._record(turn, Turn.TurnFailed, kind=failure.kind.value, final_kind=failure.final_kind, message=failure.message,
                     steps=state.step, status=failure.status)
        self._commit(turn)
        return TurnOutcome(str(turn.id), failure.status, failure=failure.to_json(), steps=state.step)

    def _round(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], messages: list[Message]) -> str | None:
        self.interrupts.checkpoint()
        state.round += 1
        if state.plan is None and state.problem is not None and self.online.escalates_on_failure(request, state, cap=False):
            self.online.escalate(turn, state, request, pool, f"a local step failed: {state.problem[1]}")
        if state.plan is not None:
            return self._follow_plan(turn, state, request, pool, messages)
        if state.problem is not None and state.problem is not state.climbed_for:
            state.climbed_for = state.problem
            higher = self.online.config.tier_above(state.tier)
            if higher is not None:
                self._record(turn, Turn.TierEscalated, round=state.round, from_tier=state.tier, to_tier=higher, reason=state.problem[1])
                state.tier = higher
        words_only = (state.final_only or self._answer_only(state, pool)) and not state.working_out
        # Asked for words only, the model still sees the tools of the round before, with
        # tool_choice "none": the prompt keeps that round's prefix, which the server's prompt
        # cache reuses, where a prompt without tools is evaluated again from its first token.
        tools = self.catalogue.tools(pool, with_scratchpad=state.has_scratch, step_refs=bool(state.observations))
        if words_only and not state.final_only and not state.asked_for_words:
            state.asked_for_words = True
            messages.append(UserMessage(answer_from_results(request.text)))
        choice = "none" if words_only else "auto"
        asked: dict[str, Any] = {"messages": [_message_record(m) for m in messages], "tools": [t.name for t in tools]}
        if words_only:
            asked["tool_choice"] = choice
        self._record(turn, Turn.LLMAsked, round=state.round, tier=state.tier, request_digest=canonical_hash(asked), tools=[t.name for t in tools])
        started = time.perf_counter()
        try:
            with self._waiting(state, "while waiting for the model"):
                # The round's reply held to the calls it accepts, or to words (call_schema.py).
                reply = self.ports.ask_llm(state.tier, messages, tools, tool_choice=choice,
                                           constraint=planner_constraint(tools, state.observations, words_only=words_only))
        except LLMError as e:
            self._record(turn, Turn.LLMFailed, round=state.round, error_type=e.kind, message=str(e))
            kind = FailureKind.PROVIDER_UNREACHABLE if isinstance(e, ProviderUnreachable) else FailureKind.BAD_LLM_REPLY
            raise _EndTurn(kind, str(e)) from None
        self._record(turn, Turn.LLMReplied, round=state.round, reply=reply.to_record(), intent_ms=_ms(started))
        if words_only and not state.final_only and not reply.is_final:
            if state.answer_from:
                # Told that the data is there, then asked for words, it calls a tool: the answer is the data.
                raise _AnswerFromData(state.answer_from)
            # A server that ignores tool_choice "none" may still send a call: it is not what was asked.
            reply = dataclasses.replace(reply, text=_call_as_text(reply), tool_calls=(), call_form="none")
        if reply.is_final:
            text = reply.text.strip()
            if placeholders_in(text) and state.corrections < 1:
                state.corrections += 1
                messages.append(reply.to_message())
                messages.append(UserMessage(PLACEHOLDER_CORRECTION))
                self._commit(turn)
                return None
            # What the loop told the model, and what it tells any model at the end of a pipeline.
            told = [m.text for m in messages[2:] if isinstance(m, UserMessage)] + [FINAL_ONLY, ANSWER_NOW]
            problem = answer_problem(text, self.tool_names, [o for o in state.observations.values() if isinstance(o, dict)], told)
            if problem is not None:
                if state.answer_corrections >= 1:
                    if state.answer_from:
                        raise _AnswerFromData(state.answer_from)
                    good = self._successes(state)
                    if problem == "tool_call_as_text" and good and self._answer_only(state, pool):
                        # Asked twice to answer a request that changes nothing, it asks for
                        # a tool again: the answer is what the good steps produced.
                        raise _AnswerFromData(good, "no_answer_after_data")
                    if problem == "raw_tool_output" and good and not self._actions_offered(pool):
                        # Asked twice for words, it hands back a step's data as JSON again (the 1.5B,
                        # after slicing the lines asked for): the answer is the data the chain ended with.
                        raise _AnswerFromData((good[-1],), "raw_output_repeated")
                    raise _EndTurn(FailureKind.UNUSABLE_ANSWER, REASONS[problem])
                state.answer_corrections += 1
                self._record(turn, Turn.AnswerRejected, round=state.round, reason=problem, text=text[:2000])
                messages.append(reply.to_message())
                messages.append(UserMessage(answer_correction(REASONS[problem])))
                self._commit(turn)
                return None
            if self._not_acted(state, pool):
                actions = self._actions_offered(pool)
                if state.problem is not None or state.reminded_to_act or state.final_only:
                    raise self._not_done(state, pool)
                state.reminded_to_act = True
                self._record(turn, Turn.AnswerRejected, round=state.round, reason="action_not_taken", text=text[:2000])
                messages.append(reply.to_message())
                messages.append(UserMessage(act_reminder(actions)))
                self._commit(turn)
                return None
            if state.problem is not None and not grounded_in(text, state.since_problem) and not self._figures_stand(state, pool, text):
                raise _EndTurn(*state.problem)
            return text
        if state.final_only:
            if state.answer_from:
                # Told twice that the data is there, then asked to answer, it
                # calls a tool again: the answer is the data.
                raise _AnswerFromData(state.answer_from)
            if state.problem is not None:
                # Asked for words after a step went wrong, it calls again: what went wrong is the outcome.
                raise _EndTurn(*state.problem)
            raise _EndTurn(FailureKind.BAD_LLM_REPLY, "a tool call after the pipeline was closed")
        critical = next((why for c in reply.tool_calls if (why := self.online.critical(request, c.name))), None) if not state.escalated else None
        if critical is not None:
            self.online.escalate(turn, state, request, pool, critical)
            return None
        messages.append(reply.to_message())
        for call in reply.tool_calls:
            fresh = bool(self._successes(state)) and not _pipes(call)
            state.step += 1
            state.model_steps += 1
            observation, others = self._step(turn, state, request, pool, call, reply.call_form)
            if fresh and state.step in state.executed:
                # A read refused before it ran (its arguments off schema) gets its
                # correction round with the tools; a read that ran is the data to answer from.
                state.read_again = True
            messages.append(ToolResult(call_id=call.id, name=call.name, content=_content(observation, self.shown_home), is_error=observation.get("ok") is False))
            self._commit(turn, *others)
            self.interrupts.checkpoint()
        if state.presented is not None:
            # A presentation closed a request that changes nothing: what it made is the answer
            # (asked for words, the 1.5B copied a 20-line description back in 118 s).
            raise _AnswerFromData((state.presented,), "presentation")
        if state.final_only:
            messages.append(UserMessage(FINAL_ONLY if state.pipeline_closed else ANSWER_NOW))
        return None

    def _answer_only(self, state: _State, pool: list[str]) -> bool:
        """A request that changes nothing (no executor with side effects made the
        shortlist) is answered once the model, holding data, takes a step that does
        not work on it (a small model offered tools calls one more read, and another,
        instead of answering), after three steps of its own, or once the last good
        step gave a single value rather than a list. While each step works on the
        list before it (read, then filter, then count), the chain goes on. A request
        that acts keeps its tools until its action closes the pipeline."""
        if state.model_steps == 0 or state.has_scratch:
            # Spilled data is read back with scratchpad_read: that tool stays.
            return False
        if self._actions_offered(pool):
            return False
        if state.read_again or state.model_steps >= READ_ONLY_MODEL_STEPS:
            return True
        if state.exact is not None and any(_worked_out(self._executor_of(state, n)) for n in self._successes(state)):
            # The exact ask is worked out: slicing the slice again gives nothing new (the 1.5B sliced three times).
            return True
        # A chain goes on from a list (filter it, sort it, count it); a single value (the
        # time, a sum, a description) is what the answer says. Offered tools after one,
        # the 0.5B asked for the time again.
        good = self._successes(state)
        return bool(good) and not isinstance(state.observations[good[-1]].get("entries"), list)

    def _not_acted(self, state: _State, pool: list[str]) -> bool:
        """A request that names an action is answered in words while none of its
        actions ran ("the largest file is x", and no message sent), and
        there was something to act on: the last good step did not find an empty list
        ("there are no .tmp files" is the answer to "delete the .tmp files")."""
        if state.acted or not self._actions_offered(pool):
            return False
        good = self._successes(state)
        return not (good and state.observations[good[-1]].get("entries") == [])

    def _not_done(self, state: _State, pool: list[str]) -> _EndTurn:
        """How a turn that did not act ends: a step that failed, a fence or the user's no is
        the outcome; otherwise the action the request named was never taken."""
        if state.problem is not None:
            return _EndTurn(*state.problem)
        return _EndTurn(FailureKind.ACTION_NOT_TAKEN, " or ".join(self._actions_offered(pool)))

    def _figures_stand(self, state: _State, pool: list[str], text: str) -> bool:
        """After a call that was refused for its form and would have changed nothing, in a
        request that changes nothing, an answer stands when every number in it is in the
        data the turn's good steps produced ("1284", read from the page, after a count
        piped from nowhere was refused); a number from nowhere ("8500" for files of 1000,
        2500 and 500 bytes) does not."""
        if state.problem is None or state.problem is not state.unrun_read or self._actions_offered(pool):
            return False
        good = [state.observations[s] for s in self._successes(state)]
        return figures_from(text, good)

    def _piping_hint(self, state: _State) -> str:
        """What a step may refer to, with the numbers it may use: the 1.5B gave
        "from_step": 0 for the list of the step before, and, told only the rule,
        read the files again and sent the same 0."""
        lists = [f"{s} ({state.executed[s][0]})" for s in self._successes(state)
                 if s in state.executed and isinstance(state.observations[s].get("entries"), list)]
        hint = "refer only to earlier steps that succeeded: from_step N for a list, {{stepN.field}} as a whole value"
        return hint + (f"; the steps with a list: {', '.join(lists)}" if lists else "")

    @staticmethod
    def _successes(state: _State) -> tuple[int, ...]:
        return tuple(sorted(step for step, obs in state.observations.items() if isinstance(obs, dict) and obs.get("ok") is not False))

    def _actions_offered(self, pool: list[str]) -> list[str]:
        """The executors with side effects on the shortlist: the actions the request names."""
        return sorted(name for name in pool if self._acts(name))

    def _acts(self, name: str) -> bool:
        te = self.catalogue.get(name)
        if te is not None:
            return bool(te.entry.side_effects)
        builtin = self.catalogue.builtins.get(name)
        return builtin is not None and bool(builtin.entry.side_effects)

    # The cascade ---------------------------------------------------------
    def _consult_plans(self, turn: Turn, request: TurnRequest) -> PlanPlayer | None:
        """Ask the cascade for a plan (a port: replay gets the recorded answer)."""
        consult = getattr(self.ports, "consult_plans", None)
        started = time.perf_counter()
        found = consult(request.text) if consult is not None else None
        if found is None:
            return None
        self._record(turn, Turn.PlanConsulted, **found, lookup_ms=_ms(started))
        self._commit(turn)
        return PlanPlayer(found["plan"], found["entry"]) if found["plan"] is not None else None

    def _follow_plan(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], messages: list[Message]) -> str | None:
        """One round with the plan in the model's place: its next call, checked
        and run like any, or its answer. When a step or the answer goes wrong,
        the model takes over with what the plan did so far."""
        reply = state.plan.reply(state.step)
        filler = self._filler(turn, state, request) if state.online and self.online.config.fillers else None
        if reply is None:
            try:
                # Written into a copy: the template is part of the recorded plan.
                filled = filler.fill_segments(state.plan.plan["answer"], state.observations) if filler is not None else None
                answer = state.plan.answer(state.observations, filled)
            except TemplateGap as gap:
                return self._abandon_plan(turn, state, request, pool, str(gap))
            except FillerFailed as e:
                state.problem, state.since_problem = (FailureKind.BAD_LLM_REPLY, str(e)), []
                return self._abandon_plan(turn, state, request, pool, str(e))
            left = placeholders_in(answer)
            if left:
                # Shown as is, the user would read "{{get_urls.result}}" as the answer.
                return self._abandon_plan(turn, state, request, pool, f"the answer holds {', '.join(left)}, which names no step's value")
            if state.online and state.problem is not None and not grounded_in(answer, state.since_problem):
                # An online plan's answer after a failed step must rest on what succeeded since.
                raise _EndTurn(*state.problem)
            return answer
        call = reply.tool_calls[0]
        if filler is not None and has_fillers(call.arguments):
            try:
                arguments = filler.fill_value(dict(call.arguments), state.observations, step=state.step + 1, where="args")
            except FillerFailed as e:
                # Like a step that failed: the turn's problem unless a later step goes through.
                reason = f"step {state.step + 1} ({call.name}) could not be written: {e}"
                state.problem, state.since_problem = (FailureKind.STEP_FAILED, reason), []
                return self._abandon_plan(turn, state, request, pool, reason)
            call = dataclasses.replace(call, arguments=arguments)
            reply = dataclasses.replace(reply, tool_calls=(call,))
        messages.append(reply.to_message())
        state.step += 1
        before = state.problem
        observation, others = self._step(turn, state, request, pool, call, "plan")
        messages.append(ToolResult(call_id=call.id, name=call.name, content=_content(observation, self.shown_home), is_error=observation.get("ok") is False))
        self._commit(turn, *others)
        # An online plan after a recovery goes on past the earlier failure; only a new one stops it.
        if observation.get("ok") is False or (state.problem is not None and (not state.online or state.problem is not before)):
            reason = f"step {state.step} ({call.name}) did not succeed"
            if state.online and observation.get("ok") is False:
                reason += f": {step_failure_words(call.name, observation)}"
            return self._abandon_plan(turn, state, request, pool, reason)
        return None

    def _filler(self, turn: Turn, state: _State, request: TurnRequest) -> Filler:
        return Filler(lambda cls, **f: self._record(turn, cls, **f), self.ports.ask_llm, tier=ROLE_TIERS["filler"],
                      request_text=request.text, system_prompt=self.online.config.system_prompt("filler", FILLER_PROMPT),
                      round_of=lambda: state.round)

    def _abandon_plan(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], reason: str) -> None:
        self._record(turn, Turn.PlanAbandoned, step=state.step, reason=reason)
        self._commit(turn)
        state.plan = None
        if state.online:
            # An online plan gets one recovery call; after it, no model takes over.
            self.online.plan_failed(turn, state, request, pool, reason)

    # One step --------------------------------------------------------------
    def _step(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], call: ToolCall, call_form: str) -> tuple[dict[str, Any], list[Any]]:
        step, name, args = state.step, call.name, dict(call.arguments)
        self._record(turn, Turn.StepProposed, step=step, call_id=call.id, executor=name, args=args, call_form=call_form)
        te = self.catalogue.get(name)

        decision = state.guards.check(name, args, vectorial=bool(te and te.entry.vectorial))
        if not decision.allowed:
            observation = decision.observation()
            repeated = False
            if decision.outcome == DUPLICATE_READ:
                key = (name, targets_of(name, args) or frozenset({canonical_hash(args)}))
                repeated = key in state.intercepted
                state.intercepted.add(key)
                # A well-formed call for data the turn holds: as good as that data
                # for an answer after a problem.
                for earlier in decision.previous_steps:
                    if isinstance(state.observations.get(earlier), dict):
                        self._succeeded(state, state.observations[earlier])
                # If no usable answer comes after this, the answer is that data.
                state.answer_from = tuple(decision.previous_steps)
            record = decision.to_json()
            if repeated:
                # Told once that the data is there, asked again: the model is
                # looping. The turn ends with the data it already has.
                record = {**record, "outcome": "duplicate_read_repeated", "ends_turn": True}
            self._record(turn, Turn.StepIntercepted, step=step, decision=record, observation=observation)
            state.guards = state.guards.record(step, name, args, executed=False, succeeded=False)
            if repeated:
                # The model is looping on data it has: it is asked once more, for words
                # only (tool_choice "none"), to answer from that data.
                state.final_only = True
                return observation, []
            if decision.ends_turn:
                self._commit(turn)
                kind = FailureKind.CAP_STEPS if decision.outcome == "cap_steps" else FailureKind.CAP_SAME_EXECUTOR
                raise _EndTurn(kind, str(self.settings.cap_steps) if kind is FailureKind.CAP_STEPS else name)
            return observation, []

        call_key = (name, canonical_hash(args))
        if call_key in state.failed_calls:
            return self._repeated_failure(turn, state, step, name, args, call_key)

        if call.arguments_error is not None:
            observation = {"ok": False, "error_class": "invalid_arguments", "error": call.arguments_error,
                           "hint": f"call {name} again with its arguments written as one JSON object"}
            return self._reject(turn, state, step, name, args, "arguments", {"message": call.arguments_error}, observation)

        if not self._offered(request, name):
            return self._reject(turn, state, step, name, args, "autonomy", {"autonomy": request.autonomy},
                                autonomy.refusal(request.autonomy, name))

        if name in self.catalogue.builtins:
            builtin = self.catalogue.builtins[name]
            approval, refused = self._gate(turn, state, request, step, name, args, side_effects=builtin.entry.side_effects,
                                           idempotent=builtin.entry.idempotent, targets=builtin.targets(args))
            if refused is not None:
                return refused, []
            observation, others = self.ports.call_builtin(name, args, step=step, approval=approval)
            self._record(turn, Turn.BuiltinCalled, step=step, name=name, observation=observation)
            ok = observation.get("ok") is not False
            self._record(turn, Turn.ObservationRecorded, step=step, ok=ok, observation=observation, spill={})
            state.guards = state.guards.record(step, name, args, executed=True, succeeded=ok)
            if ok:
                self._succeeded(state, observation)
                state.acted = state.acted or bool(builtin.entry.side_effects)
            return observation, others

        if name == SCRATCHPAD_READ:
            _, refused = self._gate(turn, state, request, step, name, args, side_effects=False, idempotent=True)
            if refused is not None:
                return refused, []
            observation = scratchpad_read(state.scratch, args)
            self._record(turn, Turn.ObservationRecorded, step=step, ok=observation.get("ok") is not False, observation=observation, spill={})
            state.guards = state.guards.record(step, name, args, executed=True, succeeded=observation.get("ok") is not False)
            if observation.get("ok") is not False:
                self._succeeded(state, observation)
            return observation, []

        # The pool is what the model was shown first; any active executor of the
        # catalogue may still be called by name.
        if te is None:
            observation = unknown_executor(name, sorted(self.catalogue.executors))
            observation["hint"] = "call one of the available executors, by its exact name"
            # A chain of existing executors that the mnestome knows may do it
            # (seeds/002 ch. 11.1.1): offered as part of the observation.
            synt = self.ports.mnest_suggest(name, args, dict(state.executed), step)
            if synt is not None:
                observation["synt"] = synt
            return self._reject(turn, state, step, name, args, "unknown_executor", {"executor": name}, observation)

        try:
            named = frozenset(self._actions_offered(pool))
            transition = next_state(compute_state(state.shape, named_actions=named), name, args,
                                    open_actions=open_actions(state.shape, named))
        except UnknownVerbError as e:
            return self._reject(turn, state, step, name, args, "shape", {"error_class": "unknown_verb", "message": str(e)},
                                {"ok": False, "error_class": "unknown_verb", "error": str(e)})
        if transition.error_class is not None:
            action = plan_remediation(RemediationContext(
                error_class=transition.error_class, executor=name, args=args, request_text=request.text,
                catalogue=frozenset(self.catalogue.executors),
            ))
            observation = {"ok": False, "error_class": transition.error_class, "error": action.message,
                           "remediation": action.to_json(), "hint": _shape_hint(transition.error_class, name)}
            result = self._reject(turn, state, step, name, args, "shape", transition.to_json(), observation, action.to_json())
            if action.kind == "force_final_answer":
                state.final_only = state.pipeline_closed = True
            elif action.kind == "dialog":
                self._commit(turn)
                raise _EndTurn(FailureKind.NEEDS_INPUTS, f"{name} needs a target (which files, which items?)")
            elif action.kind == "prereq_then_retry" and not state.remediating:
                return self._remediate(turn, state, request, pool, call, action)
            return result

        try:
            resolution = resolve_args(args, state.observations, current_step=step, rows=name.endswith("_entries"))
        except TurnError as e:
            error = {"code": e.code, "message": e.message}
            return self._reject(turn, state, step, name, args, "piping", error, {
                "ok": False, "error_class": e.code, "error": e.message, "hint": self._piping_hint(state)})

        completed_args, completed = complete_arguments(resolution.args, te.tool.parameters.get("properties", {}),
                                                       resolution.args.get("entries"), request.text)
        completed_args, paths_completed = complete_paths(completed_args, path_arguments(completed_args, te.loaded.input_schema),
                                                         request.text)
        completed.update(paths_completed)
        if completed:
            resolution = dataclasses.replace(resolution, args=completed_args)
        problems = validate_args(te.loaded.input_schema, resolution.args)
        if problems:
            trimmed, dropped = without_blank_optionals(resolution.args, te.loaded.input_schema, problems)
            if dropped and not validate_args(te.loaded.input_schema, trimmed):
                resolution, problems = dataclasses.replace(resolution, args=trimmed), []
                completed["dropped"] = dropped
        if problems:
            error = {"errors": problems}
            required = te.tool.parameters.get("required", [])
            hint = f"call {name} again with arguments that fit its schema" + (f" (required: {', '.join(required)})" if required else "")
            return self._reject(turn, state, step, name, args, "schema", error,
                                {"ok": False, "error_class": "schema_violation", "errors": problems, "hint": hint})

        if self.check_policy is not None:
            try:
                self.check_policy(te.loaded, resolution.args)
            except InvocationError as e:
                details = e.details()
                return self._reject(turn, state, step, name, args, "policy", details, {
                    "ok": False, "error_class": "policy_violation", "error": details,
                    "hint": f"{name} may only touch what its manifest declares: use a path or host inside that scope (a path in "
                            "the user's home is written ~/..., as the request writes it), or tell the user it is out of reach"})

        self._record(turn, Turn.StepResolved, step=step, args=resolution.args, pipings=[p.to_json() for p in resolution.pipings],
                     completed=completed or None)

        started = time.perf_counter()
        verdict = vaglio(
            name, resolution.args, intent_text=request.text, policy=self.policy, threshold=self.settings.judge_threshold,
            side_effects=te.entry.side_effects, idempotent=te.entry.idempotent, autonomy=request.autonomy,
        )
        self._record(turn, Turn.StepJudged, step=step, verdict=verdict.to_json(), vaglio_ms=_ms(started))
        if verdict.decision != DENY and self.judge.applies(name, te.loaded, side_effects=te.entry.side_effects):
            verdict = self.judge.review(lambda cls, **f: self._record(turn, cls, **f), self.ports.ask_llm, round=state.round, step=step,
                                        request_text=request.text, name=name, args=resolution.args, verdict=verdict)
        if verdict.decision == DENY:
            observation = {"ok": False, "error_class": "vaglio_denied", "error": verdict.reason}
            return self._observe_refusal(turn, state, step, name, resolution.args, observation)
        # No autonomy level answers for the user (seeds/000: the asymmetry holds "even within Full").
        if verdict.decision == ASK:
            self._record(turn, Turn.ApprovalAsked, step=step, executor=name, reason=verdict.reason)
            with self._waiting(state, "while waiting for approval"):
                approved, by = self.ports.approve(step, name, resolution.args, verdict.reason)
            self._record(turn, Turn.ApprovalAnswered, step=step, approved=bool(approved), by=by)
            if not approved:
                observation = {"ok": False, "error_class": "declined", "error": f"the user did not approve {name}; do not retry it"}
                return self._observe_refusal(turn, state, step, name, resolution.args, observation)

        started = time.perf_counter()
        result = self.ports.call_executor(name, resolution.args, turn_id=str(turn.id), step=step, actor=request.actor, channel=request.channel)
        self._record(
            turn, Turn.StepInvoked, step=step, invocation_id=result.invocation_id, executor=name, version=result.version,
            digest=result.digest, args_hash=result.args_hash, ok=result.ok, kind=result.kind, exec_ms=_ms(started),
        )
        # The process may succeed while the executor reports a failure in its answer.
        succeeded = result.ok and result.observation.get("ok") is not False
        state.observations[step] = result.observation
        state.executed[step] = (name, result.version)
        if _worked_out(name):
            state.working_out = False
        state.acted = state.acted or (succeeded and self._acts(name))
        spilled = spill(result.observation, turn_id=str(turn.id), step=step, threshold_bytes=self.settings.scratchpad_threshold_bytes)
        if spilled.spilled:
            state.scratch.put(spilled.scratchpad_id, spilled.payload)
            state.has_scratch = True
        observation = dict(spilled.history_observation)
        if spilled.spilled and self.online.config.summarise_spills:
            gist = summarise(lambda cls, **f: self._record(turn, cls, **f), self.ports.ask_llm, round=state.round,
                             tier=ROLE_TIERS["summariser"], request_text=request.text, observation=result.observation,
                             system_prompt=self.online.config.system_prompt("summariser", SUMMARISER_PROMPT))
            self._record(turn, Turn.SpillSummarised, step=step, scratchpad_id=spilled.scratchpad_id, gist=gist.text,
                         tier=ROLE_TIERS["summariser"], model=gist.model, problem=gist.problem)
            if gist.text is not None:
                observation["gist"] = gist.text
        self._record(turn, Turn.ObservationRecorded, step=step, ok=succeeded, observation=observation, spill=spilled.to_json())
        for piping in resolution.pipings:
            src_executor, src_version = state.executed.get(piping.src_step, ("", ""))
            self._record(
                turn, Turn.DataPiped, src_step=piping.src_step, src_executor=src_executor, src_version=src_version,
                src_field=piping.src_field, dst_step=step, dst_executor=name, dst_version=result.version,
                dst_arg=piping.dst_arg, mechanism=piping.mechanism,
            )
        if not succeeded:
            state.failed_calls.setdefault(call_key, step)
        state.shape.append(ShapeStep(name, resolution.args, succeeded=succeeded))
        state.guards = state.guards.record(step, name, resolution.args, executed=True, succeeded=succeeded)
        if not result.ok:
            # The executor could not do its work at all (crash, timeout, sandbox):
            # unlike an answer that reports a missing file, that is the turn's problem.
            kind = FailureKind.STEP_REFUSED if result.kind == "PolicyViolation" else FailureKind.STEP_FAILED
            state.problem, state.since_problem = (kind, step_failure_words(name, result.observation)), []
        elif not succeeded and self._acts(name):
            # An action that reports it could not be done (a message to an unknown channel) is
            # the turn's problem too: the 1.5B answered that it had told someone after such a send.
            state.problem, state.since_problem = (FailureKind.STEP_FAILED, step_failure_words(name, result.observation)), []
        elif succeeded:
            self._succeeded(state, result.observation)
            if transition.category == "F" and state.plan is None and not self._actions_offered(pool):
                state.presented = step
            if transition.category == "A":
                # An action that went through after a failure did what was asked;
                # its answer reports it ("saved") rather than quoting its output.
                state.problem, state.since_problem = None, []
        return observation, result.aggregates

    def _repeated_failure(self, turn: Turn, state: _State, step: int, name: str, args: dict[str, Any], key: tuple[str, str]) -> tuple[dict[str, Any], list[Any]]:
        """The very call that failed is proposed again: it is not run. The first
        time the model is told so; the second, it is asked to answer with what
        it has (a small model otherwise repeats it to the step cap)."""
        earlier = state.failed_calls[key]
        again = key in state.repeated_failures
        state.repeated_failures.add(key)
        observation = {"ok": False, "error_class": "repeated_failure", "previous_steps": [earlier],
                       "error": f"this exact call already failed at step {earlier} (see its error there)",
                       "hint": f"change the arguments of {name} as that error says, call another tool, "
                               "or tell the user plainly what could not be done"}
        decision = {"outcome": "repeated_failure", "message": observation["error"], "previous_steps": [earlier],
                    "ends_turn": False, "answer_now": again}
        self._record(turn, Turn.StepIntercepted, step=step, decision=decision, observation=observation)
        state.guards = state.guards.record(step, name, args, executed=False, succeeded=False)
        if again:
            state.final_only = True
        return observation, []

    def _gate(
        self, turn: Turn, state: _State, request: TurnRequest, step: int, name: str, args: dict[str, Any], *,
        side_effects: bool, idempotent: bool, targets: list[tuple[str, dict[str, Any]]] | None = None,
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The vaglio and, where it asks, the user, for a call that is not an
        executor's (a builtin, the scratchpad). A builtin that sets up executor
        calls for later (a schedule) is judged with each of them, as a call
        that repeats: one with side effects asks. Returns (the approval, when
        the user gave one; the refusal observation, when there is one)."""
        started = time.perf_counter()
        verdict = vaglio(name, args, intent_text=request.text, policy=self.policy, threshold=self.settings.judge_threshold,
                         side_effects=side_effects, idempotent=idempotent, autonomy=request.autonomy)
        for target, target_args in targets or ():
            te = self.catalogue.get(target)
            if te is None:
                continue  # the builtin refuses an unknown executor itself
            judged = vaglio(target, target_args, intent_text=request.text, policy=self.policy,
                            threshold=self.settings.judge_threshold, side_effects=te.entry.side_effects,
                            idempotent=not te.entry.side_effects, autonomy=request.autonomy)
            if _SEVERITY[judged.decision] > _SEVERITY[verdict.decision]:
                verdict = dataclasses.replace(judged, executor=name, reason=f"{name} would run {target} again and again: {judged.reason}")
        self._record(turn, Turn.StepJudged, step=step, verdict=verdict.to_json(), vaglio_ms=_ms(started))
        if verdict.decision == DENY:
            observation = {"ok": False, "error_class": "vaglio_denied", "error": verdict.reason}
            return None, self._observe_refusal(turn, state, step, name, args, observation)[0]
        if verdict.decision == ASK:
            self._record(turn, Turn.ApprovalAsked, step=step, executor=name, reason=verdict.reason)
            with self._waiting(state, "while waiting for approval"):
                approved, by = self.ports.approve(step, name, args, verdict.reason)
            self._record(turn, Turn.ApprovalAnswered, step=step, approved=bool(approved), by=by)
            if not approved:
                observation = {"ok": False, "error_class": "declined", "error": f"the user did not approve {name}; do not retry it"}
                return None, self._observe_refusal(turn, state, step, name, args, observation)[0]
            return {"by": by, "turn_id": str(turn.id), "step": step}, None
        return None, None

    def _offered(self, request: TurnRequest, name: str) -> bool:
        """Whether the turn's autonomy level lets ``name`` be offered and run (read_only: nothing with side effects)."""
        found = self.catalogue.get(name) or self.catalogue.builtins.get(name)
        return found is None or autonomy.offers(request.autonomy, side_effects=found.entry.side_effects)

    @contextmanager
    def _waiting(self, state: _State, what: str) -> Iterator[None]:
        self.interrupts.checkpoint()
        state.during = what
        with self.interrupts.waiting():
            yield
        state.during = "between steps"

    def _succeeded(self, state: _State, observation: dict[str, Any]) -> None:
        state.argument_errors = 0
        if state.problem is not None:
            state.since_problem.append(observation)

    def _remediate(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], call: ToolCall, action: RemediationAction) -> tuple[dict[str, Any], list[Any]]:
        """Run the prerequisite as a step of its own, then retry the refused call
        once with the prerequisite's list (seeds/002 ch. 4-ter). Both are steps
        like any other: checked, judged, recorded."""
        assert action.prereq_tool is not None
        state.remediating = True
        try:
            self._commit(turn)
            state.step += 1
            prereq = ToolCall(id=f"{call.id}~prereq", name=action.prereq_tool, arguments=dict(action.prereq_args))
            prereq_observation, others = self._step(turn, state, request, pool, prereq, "remediation")
            self._commit(turn, *others)
            prereq_step = state.step
            if prereq_observation.get("ok") is False:
                return {"ok": False, "error_class": NEEDS_DATA_SOURCE,
                        "error": f"{call.name} had no data; {action.prereq_tool} was run to provide it (step {prereq_step}) and failed",
                        "prerequisite": {"step": prereq_step, "observation": prereq_observation},
                        "hint": _shape_hint(NEEDS_DATA_SOURCE, call.name)}, []
            state.step += 1
            retry_args = {k: v for k, v in call.arguments.items() if k not in ("entries", FROM_STEP)}
            retry_args[FROM_STEP] = prereq_step
            retry = ToolCall(id=f"{call.id}~retry", name=call.name, arguments=retry_args)
            observation, others = self._step(turn, state, request, pool, retry, "remediation")
            if observation.get("ok") is not False and state.problem is not None and state.problem[0] is FailureKind.NEEDS_INPUTS:
                state.problem, state.since_problem = None, []
            remediated = {"prerequisite": {"executor": action.prereq_tool, "step": prereq_step}, "retried_as_step": state.step}
            return {**observation, "remediated": remediated}, others
        finally:
            state.remediating = False

    def _reject(self, turn: Turn, state: _State, step: int, name: str, args: dict[str, Any], kind: str, error: dict[str, Any], observation: dict[str, Any], remediation: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[Any]]:
        self._record(turn, Turn.StepRejected, step=step, kind=kind, error=error, observation=observation, remediation=remediation)
        state.guards = state.guards.record(step, name, args, executed=False, succeeded=False)
        error_class = observation.get("error_class")
        if error_class == PIPELINE_ALREADY_CLOSED:
            return observation, []
        if kind != "arguments":
            # The same call proposed again is refused the same way: it is intercepted like a
            # repeated failure (the 1.5B sent one refused move five times, to the time limit).
            state.failed_calls.setdefault((name, canonical_hash(args)), step)
        words = step_failure_words(name, observation)
        if kind in ("policy", "autonomy"):
            state.problem = (FailureKind.STEP_REFUSED, words)
        elif error_class == NEEDS_DATA_SOURCE:
            state.problem = (FailureKind.NEEDS_INPUTS, f"{name} needs data to work on (which file, folder or items?)")
        else:
            state.problem = (FailureKind.STEP_FAILED, words)
            if not self._acts(name):
                # A call refused for its form that would have changed nothing: it never ran.
                state.unrun_read = state.problem
        state.since_problem = []
        if kind in ("arguments", "schema"):
            state.argument_errors += 1
            if state.argument_errors > 1:
                # One correction round was given; a second unusable call ends it.
                self._commit(turn)
                raise _EndTurn(FailureKind.INVALID_ARGUMENTS, words)
        return observation, []

    def _observe_refusal(self, turn: Turn, state: _State, step: int, name: str, args: dict[str, Any], observation: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        self._record(turn, Turn.ObservationRecorded, step=step, ok=False, observation=observation, spill={})
        state.guards = state.guards.record(step, name, args, executed=False, succeeded=False)
        state.problem, state.since_problem = (FailureKind.STEP_REFUSED, step_failure_words(name, observation)), []
        return observation, []


_SEVERITY = {ALLOW: 0, ASK: 1, DENY: 2}

def _shape_hint(error_class: str, name: str) -> str:
    if error_class == NEEDS_DATA_SOURCE:
        return (f"{name} works on a list from an earlier step: first call a source (read_files for a named file, "
                "find_files for a folder, get_urls for a page), then call it again with from_step set to that step")
    if error_class == PIPELINE_ALREADY_CLOSED:
        return "the work is done: answer the user in plain text"
    return "a request with a target (which files, which items) is needed"


ANSWER_LIMIT = 8000


def compose_answer(observations: list[dict[str, Any]]) -> str:
    """An answer made of what earlier steps produced: their content, or their
    entries' content, as text (bounded)."""
    parts: list[str] = []
    for obs in observations:
        content = obs.get("content")
        if isinstance(content, (str, int, float)) and not isinstance(content, bool):
            parts.append(str(content))
            continue
        entries = obs.get("entries")
        if isinstance(entries, list):
            for e in entries:
                # An entry as a line a person reads: its content or text, else its path or name.
                value = next((e[k] for k in ("content", "text", "path", "name") if e.get(k) is not None), None) if isinstance(e, dict) else None
                parts.append(str(value) if value is not None else orjson.dumps(e).decode())
            continue
        parts.append(orjson.dumps({k: v for k, v in obs.items() if k not in ("ok", "metadata")}).decode())
    text = "\n".join(p.strip("\n") for p in parts).strip()
    return text if len(text) <= ANSWER_LIMIT else text[:ANSWER_LIMIT] + "\n[… cut]"


# Verbs whose steps work data out (a slice, a sort, a count), rather than fetch or pass it on.
_WORKING_OUT_VERBS = frozenset({"extract", "sort", "compute", "group", "classify", "compare"})


def _worked_out(executor: str) -> bool:
    return executor.split("_", 1)[0] in _WORKING_OUT_VERBS


def _textual(observation: Any) -> bool:
    """The step gave text (a file's content), not a list of records."""
    if not isinstance(observation, dict):
        return False
    entries = observation.get("entries")
    return isinstance(observation.get("content"), str) or (
        isinstance(entries, list) and any(isinstance(e, dict) and isinstance(e.get("content"), str) for e in entries))


def _listing(observation: dict[str, Any], home: str) -> str:
    """A worked-out result as an answer: its text, or one line an entry (its text,
    content or path, paths in the home written ``~/...``)."""
    content = observation.get("content")
    if isinstance(content, str) and content.strip():
        return content.strip("\n")
    lines = []
    for entry in observation.get("entries") or []:
        value = next((entry[k] for k in ("text", "content", "path", "name") if isinstance(entry, dict) and entry.get(k) is not None), entry)
        lines.append(_home_relative(value, home.rstrip("/")) if isinstance(value, str) else orjson.dumps(value).decode())
    return "\n".join(str(line) for line in lines) if lines else compose_answer([observation])


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _pipes(call: ToolCall) -> bool:
    """Whether a call works on an earlier step's data (``from_step`` or a ``{{stepN.field}}``)."""
    return FROM_STEP in call.arguments or "{{step" in orjson.dumps(call.arguments).decode()


def _call_as_text(reply: LLMReply) -> str:
    """A reply's calls as the text a model would have written for them (judged as a call written as text)."""
    calls = "\n".join(orjson.dumps({"name": c.name, "arguments": c.arguments}).decode() for c in reply.tool_calls)
    return f"{reply.text}\n{calls}".strip()


def _content(observation: dict[str, Any], home: str) -> str:
    """An observation as the model reads it: paths in the home written ``~/...``, the
    form the request uses and the policy expects. Shown /tmp/x/Desktop/a.jpg for a
    request about ~/Pictures, the 1.5B guessed /home/metnos/Pictures and was refused."""
    return orjson.dumps(_home_relative(observation, home.rstrip("/")), option=orjson.OPT_SORT_KEYS).decode()


def _home_relative(value: Any, home: str) -> Any:
    if isinstance(value, str):
        if not home:
            return value
        if value == home:
            return "~"
        return "~" + value[len(home):] if value.startswith(home + "/") else value
    if isinstance(value, dict):
        return {k: _home_relative(v, home) for k, v in value.items()}
    if isinstance(value, list):
        return [_home_relative(v, home) for v in value]
    return value


def _message_record(message: Message) -> dict[str, Any]:
    if isinstance(message, ToolResult):
        return {"role": "tool", "call_id": message.call_id, "name": message.name, "content": message.content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "text": message.text}
    if isinstance(message, UserMessage):
        return {"role": "user", "text": message.text}
    return {"role": "assistant", "text": message.text, "tool_calls": [c.to_dict() for c in message.tool_calls]}
