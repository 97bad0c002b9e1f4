"""Ports that answer a replayed turn from its recorded events.

Nothing here executes, sends or writes: the model's replies, the executors'
observations, the approvals, the clock and the ids all come back from the log
in the order the live turn asked for them. Asking for more than was recorded,
or for a different executor than the one recorded at that step, ends the
replay; the comparison then reports where the paths parted.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson

from domain.invocation import Invocation
from domain.turn import Turn
from metnos.mechanisms.invocation.outcome import failure_observation
from metnos.mechanisms.llm.errors import LLMError, ProviderUnreachable
from metnos.mechanisms.llm.constraint import Constraint
from metnos.mechanisms.llm.messages import LLMReply, Message, SystemMessage, ToolSpec, UserMessage
from metnos.runtime.scheduler.words_model import ROLE as WORDS_ROLE
from metnos.runtime.step.dialog_tools import Question
from metnos.runtime.turn.ports import ExecutorResult


class ReplayExhausted(Exception):
    """The replayed runtime asked a port for more than the turn recorded."""


class ReplayedLLMError(LLMError):
    """The recorded failure again, with the recorded kind and message."""

    def __init__(self, kind: str, message: str) -> None:
        Exception.__init__(self, message)
        self.kind = kind


class ReplayedUnreachable(ProviderUnreachable):
    def __init__(self, kind: str, message: str) -> None:
        Exception.__init__(self, message)
        self.kind = kind


class RecordedPorts:
    def __init__(
        self,
        recorded: Sequence[Any],
        invocations: dict[str, Invocation | list[Any]],
        *,
        resolve_output: Callable[[Any], Any] = lambda o: o,
        current_executor: Callable[[str], tuple[str, str] | None] = lambda _n: None,
    ) -> None:
        self._timestamps = deque(e.timestamp for e in recorded)
        self._last_ts: datetime = recorded[-1].timestamp
        self._turn_id = recorded[0].originator_id
        self._replies = deque(e for e in recorded if isinstance(e, (Turn.LLMReplied, Turn.LLMFailed)))
        self._invoked = deque(e for e in recorded if isinstance(e, Turn.StepInvoked))
        self._approvals = deque(e for e in recorded if isinstance(e, Turn.ApprovalAnswered))
        self._dialogs = deque(e for e in recorded if isinstance(e, Turn.DialogAnswered))
        # A turn that asked the user had someone to ask; one recorded without a dialog had nobody (or needed none).
        self._could_ask = any(isinstance(e, Turn.DialogAsked) for e in recorded)
        self._builtins = {e.step: e for e in recorded if isinstance(e, Turn.BuiltinCalled)}
        self._builtin_asks = _builtin_asks(recorded)
        self._rejections = {e.step: e for e in recorded if isinstance(e, Turn.StepRejected)}
        # The vaglio's mnest hint as each step recorded it (the mnestome has moved since).
        self._hints = {e.step: e.verdict.get("mnest_hint") for e in recorded if isinstance(e, Turn.StepJudged)}
        ranked = next((e for e in recorded if isinstance(e, Turn.PrefilterRanked)), None)
        self._boost = ranked.ranking.get("mnest") if ranked is not None else None
        consulted = next((e for e in recorded if isinstance(e, Turn.PlanConsulted)), None)
        self._consulted = None if consulted is None else {
            k: getattr(consulted, k) for k in ("layer", "entry", "how", "plan", "similarity", "reason", "rejected")}
        self._invocations = invocations
        self._resolve_output = resolve_output
        self._current_executor = current_executor
        self._ids_given = 0
        self.drift: list[dict[str, Any]] = []

    def now(self) -> datetime:
        if self._timestamps:
            self._last_ts = self._timestamps.popleft()
        return self._last_ts

    def new_id(self) -> UUID:
        self._ids_given += 1
        if self._ids_given > 1:
            msg = "the replayed turn asked for more ids than it recorded"
            raise ReplayExhausted(msg)
        return self._turn_id

    def ask_llm(self, tier: str, messages: Sequence[Message], tools: Sequence[ToolSpec], *, tool_choice: str = "auto",
                constraint: Constraint | None = None) -> LLMReply:
        if not self._replies:
            msg = "the replayed turn asked the model more often than the recorded one"
            raise ReplayExhausted(msg)
        event = self._replies.popleft()
        if isinstance(event, Turn.LLMFailed):
            if event.error_type in (ProviderUnreachable.kind, "provider_timeout"):
                raise ReplayedUnreachable(event.error_type, event.message)
            raise ReplayedLLMError(event.error_type, event.message)
        reply = LLMReply.from_record(event.reply)
        recorded = reply.constraint
        if recorded is not None and recorded.get("digest") != (constraint.digest if constraint is not None else None):
            # The recorded reply answers, but the grammar this code builds for the round is not the one the
            # turn was asked under: the reply's record says so, and replay diverges there. A reply recorded
            # before grammars has no record and replays as it was.
            reply = dataclasses.replace(reply, constraint={**recorded, "digest": constraint.digest if constraint is not None else None})
        return reply

    def call_executor(self, name: str, args: dict[str, Any], *, turn_id: str, step: int, actor: str, channel: str) -> ExecutorResult:
        if not self._invoked:
            msg = f"step {step} runs {name}, which the recorded turn never ran"
            raise ReplayExhausted(msg)
        recorded = self._invoked.popleft()
        if recorded.executor != name or recorded.step != step:
            msg = f"step {step} runs {name}; the recorded turn ran {recorded.executor} at step {recorded.step}"
            raise ReplayExhausted(msg)
        observation = self.recorded_observation(recorded.invocation_id)
        # Which executor would run now: a new version shows up as a changed
        # digest at this very step.
        current = self._current_executor(name)
        version, digest = current if current is not None else (recorded.version, recorded.digest)
        return ExecutorResult(
            invocation_id=recorded.invocation_id, executor=name, version=version, digest=digest,
            args_hash=recorded.args_hash, ok=recorded.ok, kind=recorded.kind, observation=observation,
        )

    def recorded_observation(self, invocation_id: str) -> dict[str, Any]:
        events = self._invocations.get(invocation_id)
        if not events:
            msg = f"invocation {invocation_id} is not in the log"
            raise ReplayExhausted(msg)
        for event in events:
            if isinstance(event, Invocation.InvocationCompleted):
                if event.ok and event.output is not None:
                    return self._resolve_output(event.output)
                return failure_observation(event.kind, event.error, event.stderr_tail)
            if isinstance(event, Invocation.InvocationRefused):
                return {"ok": False, "error": {"kind": event.kind, **event.error}}
        msg = f"invocation {invocation_id} never completed"
        raise ReplayExhausted(msg)

    def approve(self, step: int, executor: str, args: dict[str, Any], reason: str) -> tuple[bool, str]:
        if not self._approvals:
            msg = f"step {step} asks approval for {executor}; the recorded turn asked none there"
            raise ReplayExhausted(msg)
        event = self._approvals.popleft()
        return event.approved, event.by

    def can_ask(self) -> bool:
        return self._could_ask

    def ask_user(self, question: Question) -> tuple[str | None, str]:
        if not self._dialogs:
            msg = f"step {question.step} asks the user {question.question!r}; the recorded turn asked nothing more"
            raise ReplayExhausted(msg)
        event = self._dialogs.popleft()
        if event.step != question.step:
            msg = f"step {question.step} asks the user {question.question!r}; the recorded turn asked at step {event.step}"
            raise ReplayExhausted(msg)
        return event.answer, event.by

    def call_builtin(self, name: str, args: dict[str, Any], *, step: int, approval: dict[str, Any] | None = None,
                     models: Callable[[str], Any] | None = None) -> tuple[dict[str, Any], list[Any]]:
        recorded = self._builtins.get(step)
        if recorded is None or recorded.name != name:
            msg = f"step {step} calls the builtin {name}, which the recorded turn did not call there"
            raise ReplayExhausted(msg)
        # The model calls the builtin made (a schedule's words) asked again as recorded: through ``models`` they
        # are recorded once more and answered by ask_llm from the log, never by a model.
        for asked in self._builtin_asks.get(step, []) if models is not None else []:
            try:
                models(asked.tier).complete([SystemMessage(m["text"]) if m["role"] == "system" else UserMessage(m["text"])
                                             for m in asked.sent])
            except LLMError:
                pass  # recorded as LLMFailed again; the builtin's observation is the recorded one
        return recorded.observation, []

    def mnest_boost(self, ranking: dict[str, Any], context: list[str]) -> dict[str, Any] | None:
        # The mnestome has grown since; the turn saw the boost it recorded.
        return self._boost

    def consult_plans(self, text: str) -> dict[str, Any] | None:
        # The plans have changed since; the turn followed the plan it recorded.
        return self._consulted

    def mnest_hint(self, name: str, context: list[str], step: int) -> dict[str, Any] | None:
        return self._hints.get(step)

    def mnest_suggest(self, name: str, args: dict[str, Any], invoked: dict[int, tuple[str, str]], step: int) -> dict[str, Any] | None:
        recorded = self._rejections.get(step)
        return recorded.observation.get("synt") if recorded is not None else None


def _builtin_asks(recorded: Sequence[Any]) -> dict[int, list[Any]]:
    """The side calls a builtin made (role: the schedule's words), by the step of the builtin they preceded."""
    asks: dict[int, list[Any]] = {}
    waiting: list[Any] = []
    for e in recorded:
        if isinstance(e, Turn.LLMAsked) and e.role == WORDS_ROLE:
            waiting.append(e)
        elif isinstance(e, Turn.BuiltinCalled) and waiting:
            asks[e.step], waiting = waiting, []
    return asks


def output_resolver(blobs: Any) -> Callable[[Any], Any]:
    def resolve(output: Any) -> Any:
        if isinstance(output, dict) and set(output) == {"blob", "size"}:
            return orjson.loads(blobs.get(output["blob"]))
        return output

    return resolve
