"""The loop of one turn (seeds/002 ch. 2), recording every decision as an event.

The loop is deterministic given its ports: the same replies, observations,
approvals, clock readings and ids give the same events. That is what the
replayer checks, by running this very code with ports fed from the log.

Order of the checks on a proposed call, as the spec gives it: the guards
(caps, duplicate read), the executor's existence, the pipeline shape, step
references (from_step, {{stepN.field}}), the argument schema, the sandbox
policy, then the vaglio (guard and judge) and, where it asks, the user.
Each refusal becomes an observation the model can correct. A step's events
(and the invocation's) are committed together, in one transaction.
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
from metnos.invocation.errors import InvocationError
from metnos.llm.errors import LLMError, ProviderUnreachable
from metnos.llm.messages import Message, SystemMessage, ToolCall, ToolResult, UserMessage
from metnos.mnestome.boost import apply_boost
from metnos.turn.catalogue import SCRATCHPAD_READ, TurnCatalogue
from metnos.turn.errors import TurnError
from metnos.turn.failures import FailureKind, turn_failure, unknown_executor
from metnos.turn.guards import TurnGuards
from metnos.turn.interrupts import InterruptGate, Interrupted
from metnos.turn.piping import resolve_args, placeholders_in
from metnos.turn.ports import TurnPorts
from metnos.turn.prompt import FINAL_ONLY, PLACEHOLDER_CORRECTION, PLANNER_PROMPT
from metnos.turn.remediation import RemediationContext, plan_remediation
from metnos.turn.scratchpad import InMemoryScratchpadStore, scratchpad_read, spill
from metnos.turn.settings import TurnSettings
from metnos.turn.shape import ShapeStep, UnknownVerbError, compute_state, next_state
from metnos.turn.vaglio import ALLOW, ASK, DENY, GuardPolicy, vaglio
from metnos.turn.validation import validate_args


class Sink(Protocol):
    def commit(self, aggregates: list[Any]) -> None: ...


@dataclass(frozen=True)
class TurnRequest:
    text: str
    actor: str = "user"
    channel: str = "cli"
    mode: str = "local"
    tier: str = "wise"


@dataclass
class TurnOutcome:
    turn_id: str
    status: str  # answered | failed | interrupted
    answer: str | None = None
    failure: dict[str, Any] | None = None
    steps: int = 0
    # Why the mnestome did not learn from this turn, if it did not (the turn is
    # recorded all the same; seeds/002 ch. 11.1: reported, never fatal).
    learning_error: str | None = None

    @property
    def message(self) -> str:
        return self.answer if self.answer is not None else (self.failure or {}).get("message", "")


@dataclass
class _State:
    step: int = 0
    round: int = 0
    corrections: int = 0
    final_only: bool = False
    guards: TurnGuards = field(default_factory=TurnGuards)
    observations: dict[int, Any] = field(default_factory=dict)
    executed: dict[int, tuple[str, str]] = field(default_factory=dict)
    shape: list[ShapeStep] = field(default_factory=list)
    scratch: InMemoryScratchpadStore = field(default_factory=InMemoryScratchpadStore)
    has_scratch: bool = False
    # What the turn is doing, for the record if a signal stops it there.
    during: str = "between steps"


class _EndTurn(Exception):
    def __init__(self, kind: FailureKind, detail: str) -> None:
        self.kind = kind
        self.detail = detail


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
            mode=request.mode, settings=self.settings.to_json(), runtime_version=self.runtime_version,
        )
        if self.observer is not None:
            self.observer(turn.pending_events[-1])
        state = _State(guards=TurnGuards(
            cap_steps=self.settings.cap_steps,
            cap_same_executor=self.settings.cap_same_executor,
            cap_same_vectorial=self.settings.cap_same_vectorial,
        ))
        with self.interrupts.deferring():
            try:
                return self._run(turn, state, request)
            except Interrupted as stop:
                return self._interrupted(turn, state, stop)

    def _run(self, turn: Turn, state: _State, request: TurnRequest) -> TurnOutcome:
        self._record(turn, Turn.CatalogueResolved, digest=self.catalogue.digest, entries=self.catalogue.entries)
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
        self._record(turn, Turn.PrefilterRanked, ranking=ranking, prefilter_ms=_ms(started))
        self._commit(turn)
        pool = [c["name"] for c in ranking["candidates"]]
        messages: list[Message] = [SystemMessage(PLANNER_PROMPT), UserMessage(request.text)]
        try:
            while True:
                answer = self._round(turn, state, request, pool, messages)
                if answer is not None:
                    self._record(turn, Turn.TurnAnswered, text=answer, steps=state.step)
                    self._commit(turn)
                    return TurnOutcome(str(turn.id), "answered", answer=answer, steps=state.step)
        except _EndTurn as end:
            return self._fail(turn, state, end.kind, end.detail)

    def _interrupted(self, turn: Turn, state: _State, stop: Interrupted) -> TurnOutcome:
        # Whatever the turn had recorded since its last commit is committed
        # with the close: the step proposed, the approval asked, the model asked.
        self._record(turn, Turn.TurnInterrupted, signal=stop.signal, step=state.step, during=state.during)
        self._commit(turn)
        message = f"interrupted by {stop.signal} {state.during}, at step {state.step}"
        return TurnOutcome(str(turn.id), "interrupted", failure={"kind": "interrupted", "signal": stop.signal, "message": message}, steps=state.step)

    def _fail(self, turn: Turn, state: _State, kind: FailureKind, detail: str) -> TurnOutcome:
        failure = turn_failure(kind, detail)
        self._record(turn, Turn.TurnFailed, kind=failure.kind.value, final_kind=failure.final_kind, message=failure.message, steps=state.step)
        self._commit(turn)
        return TurnOutcome(str(turn.id), "failed", failure=failure.to_json(), steps=state.step)

    def _round(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], messages: list[Message]) -> str | None:
        self.interrupts.checkpoint()
        state.round += 1
        tools = [] if state.final_only else self.catalogue.tools(pool, with_scratchpad=state.has_scratch, step_refs=bool(state.observations))
        digest = canonical_hash({"messages": [_message_record(m) for m in messages], "tools": [t.name for t in tools]})
        self._record(turn, Turn.LLMAsked, round=state.round, tier=request.tier, request_digest=digest, tools=[t.name for t in tools])
        started = time.perf_counter()
        try:
            with self._waiting(state, "while waiting for the model"):
                reply = self.ports.ask_llm(request.tier, messages, tools)
        except LLMError as e:
            self._record(turn, Turn.LLMFailed, round=state.round, error_type=e.kind, message=str(e))
            kind = FailureKind.PROVIDER_UNREACHABLE if isinstance(e, ProviderUnreachable) else FailureKind.BAD_LLM_REPLY
            raise _EndTurn(kind, str(e)) from None
        self._record(turn, Turn.LLMReplied, round=state.round, reply=reply.to_record(), intent_ms=_ms(started))
        if reply.is_final:
            text = reply.text.strip()
            if placeholders_in(text) and state.corrections < 1:
                state.corrections += 1
                messages.append(reply.to_message())
                messages.append(UserMessage(PLACEHOLDER_CORRECTION))
                self._commit(turn)
                return None
            if not text:
                raise _EndTurn(FailureKind.BAD_LLM_REPLY, "an empty answer")
            return text
        if state.final_only:
            raise _EndTurn(FailureKind.BAD_LLM_REPLY, "a tool call after the pipeline was closed")
        messages.append(reply.to_message())
        for call in reply.tool_calls:
            state.step += 1
            observation, others = self._step(turn, state, request, pool, call, reply.call_form)
            messages.append(ToolResult(call_id=call.id, name=call.name, content=_content(observation), is_error=observation.get("ok") is False))
            self._commit(turn, *others)
            self.interrupts.checkpoint()
        if state.final_only:
            messages.append(UserMessage(FINAL_ONLY))
        return None

    # One step --------------------------------------------------------------
    def _step(self, turn: Turn, state: _State, request: TurnRequest, pool: list[str], call: ToolCall, call_form: str) -> tuple[dict[str, Any], list[Any]]:
        step, name, args = state.step, call.name, dict(call.arguments)
        self._record(turn, Turn.StepProposed, step=step, call_id=call.id, executor=name, args=args, call_form=call_form)
        te = self.catalogue.get(name)

        decision = state.guards.check(name, args, vectorial=bool(te and te.entry.vectorial))
        if not decision.allowed:
            observation = decision.observation()
            self._record(turn, Turn.StepIntercepted, step=step, decision=decision.to_json(), observation=observation)
            state.guards = state.guards.record(step, name, args, executed=False, succeeded=False)
            if decision.ends_turn:
                self._commit(turn)
                kind = FailureKind.CAP_STEPS if decision.outcome == "cap_steps" else FailureKind.CAP_SAME_EXECUTOR
                raise _EndTurn(kind, str(self.settings.cap_steps) if kind is FailureKind.CAP_STEPS else name)
            return observation, []

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
            return observation, others

        if name == SCRATCHPAD_READ:
            _, refused = self._gate(turn, state, request, step, name, args, side_effects=False, idempotent=True)
            if refused is not None:
                return refused, []
            observation = scratchpad_read(state.scratch, args)
            self._record(turn, Turn.ObservationRecorded, step=step, ok=observation.get("ok") is not False, observation=observation, spill={})
            state.guards = state.guards.record(step, name, args, executed=True, succeeded=observation.get("ok") is not False)
            return observation, []

        # The pool is what the model was shown first; any active executor of the
        # catalogue may still be called by name.
        if te is None:
            observation = unknown_executor(name, sorted(self.catalogue.executors))
            # A chain of existing executors that the mnestome knows may do it
            # (seeds/002 ch. 11.1.1): offered as part of the observation.
            synt = self.ports.mnest_suggest(name, args, dict(state.executed), step)
            if synt is not None:
                observation["synt"] = synt
            return self._reject(turn, state, step, name, args, "unknown_executor", {"executor": name}, observation)

        try:
            transition = next_state(compute_state(state.shape), name, args)
        except UnknownVerbError as e:
            return self._reject(turn, state, step, name, args, "shape", {"error_class": "unknown_verb", "message": str(e)},
                                {"ok": False, "error_class": "unknown_verb", "error": str(e)})
        if transition.error_class is not None:
            action = plan_remediation(RemediationContext(
                error_class=transition.error_class, executor=name, args=args, request_text=request.text,
                catalogue=frozenset(pool),
            ))
            observation = {"ok": False, "error_class": transition.error_class, "error": action.message, "remediation": action.to_json()}
            result = self._reject(turn, state, step, name, args, "shape", transition.to_json(), observation, action.to_json())
            if action.kind == "force_final_answer":
                state.final_only = True
            elif action.kind == "dialog":
                self._commit(turn)
                raise _EndTurn(FailureKind.NEEDS_INPUTS, f"{name} needs a target (which files, which items?)")
            return result

        try:
            resolution = resolve_args(args, state.observations, current_step=step)
        except TurnError as e:
            error = {"code": e.code, "message": e.message}
            return self._reject(turn, state, step, name, args, "piping", error, {"ok": False, "error_class": e.code, "error": e.message})

        problems = validate_args(te.loaded.input_schema, resolution.args)
        if problems:
            error = {"errors": problems}
            return self._reject(turn, state, step, name, args, "schema", error, {"ok": False, "error_class": "schema_violation", "errors": problems})

        if self.check_policy is not None:
            try:
                self.check_policy(te.loaded, resolution.args)
            except InvocationError as e:
                details = e.details()
                return self._reject(turn, state, step, name, args, "policy", details, {"ok": False, "error_class": "policy_violation", "error": details})

        self._record(turn, Turn.StepResolved, step=step, args=resolution.args, pipings=[p.to_json() for p in resolution.pipings])

        started = time.perf_counter()
        verdict = vaglio(
            name, resolution.args, intent_text=request.text, policy=self.policy, threshold=self.settings.judge_threshold,
            side_effects=te.entry.side_effects, idempotent=te.entry.idempotent,
        )
        self._record(turn, Turn.StepJudged, step=step, verdict=verdict.to_json(), vaglio_ms=_ms(started))
        if verdict.decision == DENY:
            observation = {"ok": False, "error_class": "vaglio_denied", "error": verdict.reason}
            return self._observe_refusal(turn, state, step, name, resolution.args, observation)
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
        spilled = spill(result.observation, turn_id=str(turn.id), step=step, threshold_bytes=self.settings.scratchpad_threshold_bytes)
        if spilled.spilled:
            state.scratch.put(spilled.scratchpad_id, spilled.payload)
            state.has_scratch = True
        observation = dict(spilled.history_observation)
        self._record(turn, Turn.ObservationRecorded, step=step, ok=succeeded, observation=observation, spill=spilled.to_json())
        for piping in resolution.pipings:
            src_executor, src_version = state.executed.get(piping.src_step, ("", ""))
            self._record(
                turn, Turn.DataPiped, src_step=piping.src_step, src_executor=src_executor, src_version=src_version,
                src_field=piping.src_field, dst_step=step, dst_executor=name, dst_version=result.version,
                dst_arg=piping.dst_arg, mechanism=piping.mechanism,
            )
        state.shape.append(ShapeStep(name, resolution.args, succeeded=succeeded))
        state.guards = state.guards.record(step, name, resolution.args, executed=True, succeeded=succeeded)
        return observation, result.aggregates

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
                         side_effects=side_effects, idempotent=idempotent)
        for target, target_args in targets or ():
            te = self.catalogue.get(target)
            if te is None:
                continue  # the builtin refuses an unknown executor itself
            judged = vaglio(target, target_args, intent_text=request.text, policy=self.policy,
                            threshold=self.settings.judge_threshold, side_effects=te.entry.side_effects,
                            idempotent=not te.entry.side_effects)
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

    @contextmanager
    def _waiting(self, state: _State, what: str) -> Iterator[None]:
        self.interrupts.checkpoint()
        state.during = what
        with self.interrupts.waiting():
            yield
        state.during = "between steps"

    def _reject(self, turn: Turn, state: _State, step: int, name: str, args: dict[str, Any], kind: str, error: dict[str, Any], observation: dict[str, Any], remediation: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[Any]]:
        self._record(turn, Turn.StepRejected, step=step, kind=kind, error=error, observation=observation, remediation=remediation)
        state.guards = state.guards.record(step, name, args, executed=False, succeeded=False)
        return observation, []

    def _observe_refusal(self, turn: Turn, state: _State, step: int, name: str, args: dict[str, Any], observation: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        self._record(turn, Turn.ObservationRecorded, step=step, ok=False, observation=observation, spill={})
        state.guards = state.guards.record(step, name, args, executed=False, succeeded=False)
        return observation, []


_SEVERITY = {ALLOW: 0, ASK: 1, DENY: 2}


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _content(observation: dict[str, Any]) -> str:
    return orjson.dumps(observation, option=orjson.OPT_SORT_KEYS).decode()


def _message_record(message: Message) -> dict[str, Any]:
    if isinstance(message, ToolResult):
        return {"role": "tool", "call_id": message.call_id, "name": message.name, "content": message.content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "text": message.text}
    if isinstance(message, UserMessage):
        return {"role": "user", "text": message.text}
    return {"role": "assistant", "text": message.text, "tool_calls": [c.to_dict() for c in message.tool_calls]}
