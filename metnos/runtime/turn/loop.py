"""The loop of one turn (seeds/002 ch. 2), recording every decision as an event.

The pre-filter shortlists the catalogue and the cascade may hold a plan; then,
round by round, the model (or the plan) proposes calls; each call is a step
that passes the rules' checks, runs and is observed; until an answer is
proposed that the rules let stand. The rules (metnos/runtime/turn/rules) are a
list the loop walks at fixed points of a turn; their verdicts decide what it
does. A turn's events (and its invocations') are committed in one transaction when
it closes; besides, its opening is committed before the model is first asked, and what
it holds where a person waits (an approval) or after an executor changed the world;
never one transaction a step (docs/architecture.md, "The log's write path").
How a turn ends is docs/turns.md, "Outcomes".

The loop is deterministic given its ports: the same replies, observations,
approvals, clock readings and ids give the same events. That is what the
replayer checks, by running this very code with ports fed from the log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from domain.turn import Turn
from metnos.mechanisms.llm.messages import LLMReply, Message, SystemMessage, ToolCall, ToolResult, UserMessage
from metnos.runtime.turn.answers import instructions_in
from metnos.runtime.turn.asking import ask_model
from metnos.runtime.step.catalogue import SCRATCHPAD_READ, TurnCatalogue
from metnos.runtime.turn.composing import ANSWER_LIMIT, compose_answer
from metnos.runtime.turn.conversation import context_text
from metnos.runtime.turn.direct import CALL_MODE, NotACall, parse_call
from metnos.runtime.turn.failures import FailureKind, language_of_turn, request_language, step_failure_words, turn_failure
from metnos.runtime.turn.following import consult_plans, follow_plan
from metnos.runtime.turn.grounding import exact_ask
from metnos.runtime.turn.guards import TurnGuards
from metnos.runtime.turn.hybrid import OnlineDriver, PlanFailed
from metnos.runtime.turn.interrupts import Interrupted, InterruptGate
from metnos.runtime.turn.judge import JUDGE_PROMPT, LLMJudge
from metnos.runtime.turn.offering import acts
from metnos.runtime.turn.opening import open_reads, shortlist
from metnos.runtime.turn.ports import TurnPorts
from metnos.runtime.turn.provenance import provenance_json
from metnos.runtime.turn.prompt import ANSWER_NOW, FINAL_ONLY, PLANNER_PROMPT, asked_in
from metnos.runtime.turn.quarantined import record_quarantined
from metnos.runtime.turn.rules import Answer, BaseRule, Round, Rule, Step, default_rules
from metnos.runtime.turn.rules.answers import answer_from_data
from metnos.runtime.turn.rules.provenance import trace_provenance
from metnos.runtime.turn.rules.base import POINTS, AnswerInstead, AnswerWith, End, SendBack, Settle, Unfounded, Verdict, WordsOnly
from metnos.runtime.turn.running import run_call
from metnos.runtime.turn.shown import pipes, shown_content
from metnos.runtime.turn.turn_state import AnswerFromData, EndTurn, TurnOutcome, TurnRequest, TurnState
from metnos.runtime.step.vaglio import GuardPolicy
from metnos.settings import i18n
from metnos.settings.runtime import RuntimeConfig
from metnos.settings.turn import TurnSettings

__all__ = ["ANSWER_LIMIT", "TurnLoop", "TurnOutcome", "TurnRequest", "compose_answer"]


class Sink(Protocol):
    def commit(self, aggregates: list[Any]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class TurnLoop:
    def __init__(
        self, *, ports: TurnPorts, catalogue: TurnCatalogue, settings: TurnSettings, policy: GuardPolicy, sink: Sink,
        runtime_version: str, check_policy: Callable[[Any, dict[str, Any]], None] | None = None,
        observer: Callable[[Any], None] | None = None, interrupts: InterruptGate | None = None, rules: Sequence[Rule] | None = None,
    ) -> None:
        self.ports, self.catalogue, self.settings, self.policy, self.sink = ports, catalogue, settings, policy, sink
        self.runtime_version, self.check_policy, self.observer = runtime_version, check_policy, observer
        # Replay and tests pass none: a gate nobody installed never fires.
        self.interrupts = interrupts or InterruptGate()
        # The rules the turn applies, in order (metnos/runtime/turn/rules); a test or a bench may pass others.
        self.rules: tuple[Rule, ...] = tuple(default_rules() if rules is None else rules)
        # Each point walks only the rules that look at it (a rule leaves BaseRule's no-op for the others).
        self._looking = {point: tuple(getattr(r, point) for r in self.rules if getattr(type(r), point, None) is not getattr(BaseRule, point))
                         for point in POINTS}
        # Set from each turn's [runtime] (recorded on TurnStarted, so replay judges and plans alike); off until then.
        self.judge = LLMJudge(RuntimeConfig().judge)
        self.online = OnlineDriver(self, None)
        self.shown_home = policy.home
        self.tool_names = frozenset(catalogue.executors) | frozenset(catalogue.builtins) | {SCRATCHPAD_READ}
        # An executor with side effects ran since the last commit.
        self._world_changed = False

    # Recording -----------------------------------------------------------
    def record(self, turn: Turn, event_class: type, **fields: Any) -> None:
        turn.record(event_class, at=self.ports.now(), **fields)
        if self.observer is not None:
            self.observer(turn.pending_events[-1])

    def commit(self, turn: Turn, *others: Any) -> None:
        """Hand the events recorded so far to the sink, which holds them for the turn's transaction;
        after a step that changed the world they are committed at once, so that a kill cannot lose its record."""
        self.sink.commit([turn, *others])
        if self._world_changed:
            self._world_changed = False
            self.sink.flush()

    def commit_now(self, turn: Turn) -> None:
        """Commit everything the turn holds, in one transaction: a person is about to wait."""
        self.sink.commit([turn])
        self.sink.flush()

    # The turn ------------------------------------------------------------
    def run(self, request: TurnRequest) -> TurnOutcome:
        self.shown_home = self.policy.home if request.home is None else request.home
        turn_id, started = self.ports.new_id(), self.ports.now()
        conversation = request.conversation
        if conversation is not None and conversation.get("id") is None:
            # A conversation is known by the id of the turn that started it.
            conversation = {**conversation, "id": str(turn_id)}
        turn = Turn.start(
            id=turn_id, at=started, text=request.text, actor=request.actor, channel=request.channel,
            mode=request.mode, settings=self.settings.to_json(), runtime_version=self.runtime_version, autonomy=request.autonomy,
            runtime=request.runtime, home=self.shown_home, principal=request.principal, conversation=conversation,
            language=request.language or request_language(request.text), approvals=list(request.approvals) or None,
        )
        self.online = OnlineDriver(self, request.runtime)
        self.judge = LLMJudge(self.online.config.judge, self.online.config.system_prompt("judge", JUDGE_PROMPT))
        if self.observer is not None:
            self.observer(turn.pending_events[-1])
        pure = frozenset(n for n in self.catalogue.executors if not acts(self.catalogue, n))
        state = TurnState(guards=TurnGuards(cap_steps=self.settings.cap_steps, cap_same_executor=self.settings.cap_same_executor,
                                            cap_same_vectorial=self.settings.cap_same_vectorial, pure=pure))
        state.tier = self.online.config.proposer_tier if request.runtime is not None else request.tier
        state.exact = exact_ask(request.text)
        with self.interrupts.deferring():
            try:
                return self._run(turn, state, request)
            except Interrupted as stop:
                # Whatever the turn had recorded since its last commit is committed
                # with the close: the step proposed, the approval asked, the model asked.
                self.record(turn, Turn.TurnInterrupted, signal=stop.signal, step=state.step, during=state.during)
                self.commit(turn)
                failure = {"kind": "interrupted", "signal": stop.signal, "message": f"interrupted by {stop.signal} {state.during}, at step {state.step}"}
                return TurnOutcome(str(turn.id), "interrupted", failure=failure, steps=state.step)
            finally:
                # However the loop ends (an error included), what it handed over is committed.
                self.sink.close()

    def _run(self, turn: Turn, state: TurnState, request: TurnRequest) -> TurnOutcome:
        self.record(turn, Turn.CatalogueResolved, digest=self.catalogue.digest, entries=self.catalogue.entries)
        if request.mode == CALL_MODE:
            return self._run_call(turn, state, request)
        # A quarantined executor the request would have been offered is said, never silently missing.
        record_quarantined(lambda cls, **f: self.record(turn, cls, **f), self.catalogue, request.text,
                           level=request.autonomy, pool_size=self.settings.pool_size, offer=self.settings.offer)
        if len(self.catalogue) == 0:
            return self._fail(turn, state, FailureKind.EMPTY_CATALOGUE, "")
        pool = shortlist(self, turn, request, state)
        state.plan = consult_plans(self, turn, request)
        messages: list[Message] = [SystemMessage(self.online.config.system_prompt("proposer", PLANNER_PROMPT)), UserMessage(asked_in(request.text, turn.language))]
        earlier = context_text(request.conversation)
        if earlier is not None:
            # Only a follow-up is shown more: a turn alone (or the first of a conversation) keeps its prompt byte for byte.
            messages.insert(1, SystemMessage(earlier))
        try:
            why = self.online.starts_online(request) if state.plan is None else None
            if why is not None and request.mode == "hybrid":
                self.online.escalate(turn, state, request, pool, why)
            elif why is not None:
                self.online.propose(turn, state, request, pool)
            elif state.plan is None and self.settings.opening_reads:
                # A plan from the cascade holds its own reads; an online plan proposes its own.
                open_reads(self, turn, state, request, pool, messages)
            while True:
                source = "model"
                try:
                    try:
                        answer, source = self._round(turn, state, request, pool, messages)
                    except AnswerFromData as found:
                        answer, source = answer_from_data(self, turn, state, request, pool, found), "data"
                    if answer is not None and source != "model":
                        # A plan's answer, or one made from data, is held to the rules a model's answer met.
                        verdict = self._walk("on_answer", Answer(self, turn, state, request, pool, messages, answer, source))
                        if verdict is not None:
                            self._act_on(turn, messages, verdict)
                except EndTurn as end:
                    # Every way the local loop fails (a step, a cap, an answer that is none, an
                    # action not taken) is where a hybrid turn escalates, once.
                    if not self.online.escalates_on_failure(request, state, cap=end.kind in (FailureKind.CAP_STEPS, FailureKind.CAP_SAME_EXECUTOR)):
                        raise
                    self.online.escalate(turn, state, request, pool, f"the local loop ended: {end.kind.value} ({end.detail})")
                    continue
                if answer is not None:
                    outcome = self._conclude(turn, state, request, pool, messages, answer, source=source,
                                             repairable=source != "data" and state.plan is None)
                    if outcome is not None:
                        return outcome
        except EndTurn as end:
            return self._fail(turn, state, end.kind, end.detail)
        except PlanFailed as failed:
            return self._fail(turn, state, *failed.failure(state.problem))

    def _run_call(self, turn: Turn, state: TurnState, request: TurnRequest) -> TurnOutcome:
        """A channel chose the call (metnos/runtime/turn/direct.py): one step, checked, approved and recorded
        as any; its observation is the answer. No model, no shortlist, no plan."""
        try:
            name, args = parse_call(request.text)
        except NotACall as e:
            return self._fail(turn, state, FailureKind.INVALID_ARGUMENTS, str(e))
        state.step = 1
        try:
            observation, others = self.step(turn, state, request, [name], ToolCall(id="call-1", name=name, arguments=args), "client")
        except EndTurn as end:
            return self._fail(turn, state, end.kind, end.detail)
        self.commit(turn, *others)
        if state.problem is not None:
            return self._fail(turn, state, *state.problem)
        if observation.get("ok") is False:
            return self._fail(turn, state, FailureKind.STEP_FAILED, step_failure_words(name, observation))
        text = shown_content(observation, self.shown_home)[:ANSWER_LIMIT]
        self.record(turn, Turn.TurnAnswered, text=text, steps=state.step)
        self.commit(turn)
        return TurnOutcome(str(turn.id), "answered", answer=text, steps=state.step)

    # A round: the model (or the plan) proposes ------------------------------
    def _round(self, turn: Turn, state: TurnState, request: TurnRequest, pool: list[str], messages: list[Message]) -> tuple[str | None, str]:
        self.interrupts.checkpoint()
        state.round += 1
        if state.plan is None and state.problem is not None and self.online.escalates_on_failure(request, state, cap=False):
            self.online.escalate(turn, state, request, pool, f"a local step failed: {state.problem[1]}")
        if state.plan is not None:
            return follow_plan(self, turn, state, request, pool, messages), "plan"
        words_only = isinstance(self._walk("on_ask", Round(self, turn, state, request, pool)), WordsOnly)
        reply = ask_model(self, turn, state, request, pool, messages, words_only=words_only)
        if reply.is_final:
            text = reply.text.strip()
            verdict = self._walk("on_answer", Answer(self, turn, state, request, pool, messages, text, "model", reply))
            if verdict is None:
                return text, "model"
            self._act_on(turn, messages, verdict)
            return None, "model"
        if state.final_only:
            if state.answer_from:
                # Told twice that the data is there, then asked to answer, it calls a tool again: the answer is the data.
                raise AnswerFromData(state.answer_from)
            if state.problem is not None:
                # Asked for words after a step went wrong, it calls again: what went wrong is the outcome.
                raise EndTurn(*state.problem)
            raise EndTurn(FailureKind.BAD_LLM_REPLY, i18n.english("turn.tool_call_after_close"))
        critical = next((why for c in reply.tool_calls if (why := self.online.critical(request, c.name))), None) if not state.escalated else None
        if critical is not None:
            self.online.escalate(turn, state, request, pool, critical)
            return None, "model"
        messages.append(reply.to_message())
        self._take_steps(turn, state, request, pool, messages, reply)
        return None, "model"

    def _take_steps(self, turn: Turn, state: TurnState, request: TurnRequest, pool: list[str], messages: list[Message], reply: LLMReply) -> None:
        """The model's calls, each a step; its observation goes back to the model."""
        for call in reply.tool_calls:
            fresh = bool(state.successes()) and not pipes(call)
            state.step += 1
            state.model_steps += 1
            observation, others = self.step(turn, state, request, pool, call, reply.call_form)
            if fresh and state.step in state.executed:
                # A read refused before it ran (its arguments off schema) gets its
                # correction round with the tools; a read that ran is the data to answer from.
                state.read_again = True
            messages.append(ToolResult(call_id=call.id, name=call.name, content=shown_content(observation, self.shown_home), is_error=observation.get("ok") is False))
            self.commit(turn, *others)
            self.interrupts.checkpoint()
        if state.presented is not None:
            # A presentation closed a request that changes nothing: what it made is the answer
            # (asked for words, the 1.5B copied a 20-line description back in 118 s).
            raise AnswerFromData((state.presented,), "presentation")
        if state.final_only:
            messages.append(UserMessage(FINAL_ONLY if state.pipeline_closed else ANSWER_NOW))

    # A step: the rules' checks, the run, the observation -----------------------
    def step(self, turn: Turn, state: TurnState, request: TurnRequest, pool: list[str], call: ToolCall, call_form: str) -> tuple[dict[str, Any], list[Any]]:
        name = call.name
        kind = "builtin" if name in self.catalogue.builtins else "scratchpad" if name == SCRATCHPAD_READ else "executor"
        step = Step(self, turn, state, request, pool, call, state.step, name, dict(call.arguments), self.catalogue.get(name), kind)
        self.record(turn, Turn.StepProposed, step=step.number, call_id=call.id, executor=name, args=step.args, call_form=call_form)
        verdict = self._walk("on_call", step)
        if verdict is None:
            trace_provenance(step)
        if verdict is None and kind == "executor":
            pipings = step.resolution.pipings if step.resolution is not None else ()
            self.record(turn, Turn.StepResolved, step=step.number, args=step.arguments, pipings=[p.to_json() for p in pipings],
                        completed=step.completed or None, provenance=provenance_json(step.provenance))
        if verdict is None:
            verdict = self._walk("on_resolved", step)
        if isinstance(verdict, Settle):
            state.instructions_given += instructions_in(verdict.observation)
            return verdict.observation, list(verdict.others)
        if verdict is not None:
            self._act_on(turn, None, verdict)
        observation, others = run_call(step)
        if kind != "scratchpad" and acts(self.catalogue, name):
            self._world_changed = True
        for look in self._looking["on_observation"]:
            look(step)
        return observation, others

    def _walk(self, point: str, subject: Round | Step | Answer) -> Verdict | None:
        """The first verdict of the rules, in order, at this point of the turn."""
        for look in self._looking[point]:
            verdict = look(subject)
            if verdict is not None:
                return verdict
        return None

    def _act_on(self, turn: Turn, messages: list[Message] | None, verdict: Verdict) -> None:
        """What the loop does on a verdict that is not the step's observation: it ends the turn,
        answers from data, or sends the answer back (the turn goes on)."""
        if isinstance(verdict, End):
            if verdict.commit:
                self.commit(turn)
            raise EndTurn(verdict.kind, verdict.detail)
        if isinstance(verdict, AnswerWith):
            raise AnswerFromData(verdict.steps, verdict.reason)
        if not isinstance(verdict, SendBack) or messages is None:
            raise TypeError(f"a rule gave {verdict!r} where the loop cannot act on it (a step takes Settle, End or AnswerWith; "
                            "an answer End, AnswerWith or SendBack): fix the rule")
        messages.extend(verdict.messages)
        self.commit(turn)

    # The end ---------------------------------------------------------------
    def _conclude(self, turn: Turn, state: TurnState, request: TurnRequest, pool: list[str], messages: list[Message], text: str,
                  *, source: str, repairable: bool) -> TurnOutcome | None:
        """``answered`` only for an answer the rules let stand (``source``: who proposed it, model, plan or
        data); None: the turn goes on."""
        verdict = self._walk("on_conclusion", Answer(self, turn, state, request, pool, messages, text, source, repairable=repairable))
        if verdict is None:
            self.record(turn, Turn.TurnAnswered, text=text, steps=state.step)
            self.commit(turn)
            return TurnOutcome(str(turn.id), "answered", answer=text, steps=state.step)
        if isinstance(verdict, AnswerInstead):
            return self._conclude(turn, state, request, pool, messages, verdict.text, source="data", repairable=False)
        if not isinstance(verdict, Unfounded):
            return self._act_on(turn, messages, verdict)
        if self.online.escalates_on_failure(request, state, cap=False):
            # A hybrid turn's local answer that does not hold up is a local failure like any other.
            self.online.escalate(turn, state, request, pool, f"the local answer did not hold up: {verdict.grounding.summary()}")
            return None
        failure = turn_failure(FailureKind.UNVERIFIED_ANSWER, verdict.grounding.summary(), language_of_turn(turn))
        self._record_failure(turn, state, failure)
        return TurnOutcome(str(turn.id), failure.status, answer=text, failure={**failure.to_json(), **verdict.grounding.to_json()}, steps=state.step)

    def _fail(self, turn: Turn, state: TurnState, kind: FailureKind, detail: str) -> TurnOutcome:
        failure = turn_failure(kind, detail, language_of_turn(turn))
        self._record_failure(turn, state, failure)
        return TurnOutcome(str(turn.id), failure.status, failure=failure.to_json(), steps=state.step)

    def _record_failure(self, turn: Turn, state: TurnState, failure: Any) -> None:
        self.record(turn, Turn.TurnFailed, kind=failure.kind.value, final_kind=failure.final_kind, message=failure.recorded,
                    steps=state.step, status=failure.status)
        self.commit(turn)
