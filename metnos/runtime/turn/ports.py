"""The ports of a turn: every input that is not a pure function of earlier events.

The loop reads the clock, makes ids, asks the model, runs executors, asks
for approval and asks the user a question (a dialog) only through a ``TurnPorts``. Live ports do it for real; the
replayer's ports hand back what the log recorded (replay/ports.py). The loop
writes each value it gets from a port into an event, which is what makes a
turn replayable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from metnos.mechanisms.llm.constraint import Constraint
from metnos.mechanisms.llm.messages import LLMReply, Message, ToolSpec
from metnos.runtime.mnestome.boost import boost
from metnos.runtime.mnestome.compose import suggest
from metnos.runtime.mnestome.hint import telos_hint
from domain.household import HOST
from metnos.runtime.scheduler.service import ScheduleService
from metnos.runtime.scheduler.words_model import Models
from projections.mnestome import without_private
from metnos.runtime.step.dialog_tools import Question
from metnos.runtime.step.schedule_tools import call_tool


@dataclass
class ExecutorResult:
    """What one executor call gave the loop."""

    invocation_id: str
    executor: str
    version: str
    digest: str
    args_hash: str
    ok: bool
    kind: str
    observation: dict[str, Any]
    # Aggregates whose events commit with the step (the Invocation), live only.
    aggregates: list[Any] = field(default_factory=list)


class TurnPorts(Protocol):
    def now(self) -> datetime: ...

    def new_id(self) -> UUID: ...

    def ask_llm(self, tier: str, messages: Sequence[Message], tools: Sequence[ToolSpec], *, tool_choice: str = "auto",
                constraint: Constraint | None = None) -> LLMReply: ...

    def call_executor(self, name: str, args: dict[str, Any], *, turn_id: str, step: int, actor: str, channel: str) -> ExecutorResult: ...

    def approve(self, step: int, executor: str, args: dict[str, Any], reason: str) -> tuple[bool, str]: ...

    def can_ask(self) -> bool:
        """Whether anyone can be asked a question on this turn's channel (no asker: the turn ends needs_input)."""
        ...

    def ask_user(self, question: Question) -> tuple[str | None, str]:
        """The user's answer (None: none came) and who or what gave it ("http:user", "telegram:reply", "http:timeout")."""
        ...

    def call_builtin(self, name: str, args: dict[str, Any], *, step: int, approval: dict[str, Any] | None = None,
                     models: Models | None = None) -> tuple[dict[str, Any], list[Any]]:
        """The builtin's observation and aggregates; ``models``: the turn's models as side calls it records
        (a schedule's words the rules cannot read)."""
        ...

    def mnest_boost(self, ranking: dict[str, Any], context: list[str]) -> dict[str, Any] | None: ...

    def mnest_suggest(self, name: str, args: dict[str, Any], invoked: dict[int, tuple[str, str]], step: int) -> dict[str, Any] | None: ...

    def mnest_hint(self, name: str, context: list[str], step: int) -> dict[str, Any] | None:
        """The strong mnest that leads to ``name`` from the executors the turn ran (the vaglio's hint), or None."""
        ...


Approver = Callable[[int, str, dict[str, Any], str], tuple[bool, str]]
# Asks the user a question on the channel and waits: (the answer, or None when none came; who or what gave it).
Asker = Callable[[Question], tuple[str | None, str]]


class LivePorts:
    """The real clock, ids, model, executors and the user's approval."""

    def __init__(self, *, runtime: Any, router: Any, approver: Approver, clock: Callable[[], datetime], ids: Callable[[], UUID],
                 autonomy: str = "supervised", asker: Asker | None = None, principal: str = "host",
                 confirmer: Approver | None = None, actors: Any = None, caller: dict[str, Any] | None = None) -> None:
        self.runtime = runtime
        # What the channel adds to each invocation's caller (an MCP client's transport and name); None: nothing.
        self.caller = dict(caller or {})
        # [actors] of the settings read for this turn (schedule quotas); None: the settings in force.
        self.actors = actors
        # Asks the user's yes to a schedule shown back before it is saved (a channel that wants it); None: not asked.
        self.confirmer = confirmer
        # Who the turn works for: a schedule it creates is that actor's (metnos/runtime/actors.py).
        self.principal = principal
        # The turn's autonomy level: the invoker derives each call's sandbox profile from it.
        self.autonomy = autonomy
        self.router = router
        self.approver = approver
        # None: the caller offers no way to ask the user (a dialog ends the turn needs_input).
        self.asker = asker
        self._clock = clock
        self._ids = ids

    def now(self) -> datetime:
        return self._clock()

    def _caller(self, actor: str, channel: str, step: int) -> dict[str, Any]:
        """The invocation's caller: the turn's, with the channel's own fields first (an MCP client's kind and transport)."""
        turn = {"kind": "user", "actor": actor, "channel": channel, "step": step}
        return {**self.caller, **{k: v for k, v in turn.items() if k not in self.caller}}

    def new_id(self) -> UUID:
        return self._ids()

    def ask_llm(self, tier: str, messages: Sequence[Message], tools: Sequence[ToolSpec], *, tool_choice: str = "auto",
                constraint: Constraint | None = None) -> LLMReply:
        # The tier's own temperature, token budget and reasoning setting (config.toml [llm.tiers.*]).
        if constraint is None:
            return self.router.for_tier(tier).complete(list(messages), list(tools), tool_choice=tool_choice)
        return self.router.for_tier(tier).complete(list(messages), list(tools), tool_choice=tool_choice, constraint=constraint)

    def call_executor(self, name: str, args: dict[str, Any], *, turn_id: str, step: int, actor: str, channel: str) -> ExecutorResult:
        # The runtime's outgoing port (the services' outbox) wraps the call: a message a step sends is queued first.
        around = getattr(self.runtime, "outgoing", None)
        if around is not None:
            return around(name, args, turn_id, lambda: self._call_executor(name, args, turn_id=turn_id, step=step, actor=actor,
                                                                           channel=channel))
        return self._call_executor(name, args, turn_id=turn_id, step=step, actor=actor, channel=channel)

    def _call_executor(self, name: str, args: dict[str, Any], *, turn_id: str, step: int, actor: str, channel: str) -> ExecutorResult:
        call = self.runtime.invoker.call(
            name, args, caller=self._caller(actor, channel, step), turn_id=turn_id,
            autonomy=self.autonomy,
        )
        # A check that failed at call time quarantines the version now, not at the next boot.
        self.runtime.record_quarantine(call)
        inv = call.invocation
        aggregates = [inv] if inv is not None else []
        outcome = call.outcome
        return ExecutorResult(
            invocation_id=str(inv.id) if inv is not None else "",
            executor=name,
            version=call.executor.version if call.executor else (inv.executor_version if inv else ""),
            digest=call.executor.digest if call.executor else "",
            args_hash=inv.args_hash if inv is not None else "",
            ok=call.ok,
            kind=(outcome.kind or "ok") if outcome is not None else (call.refusal.kind if call.refusal else "ok"),
            observation=call.observation(),
            aggregates=aggregates,
        )

    def approve(self, step: int, executor: str, args: dict[str, Any], reason: str) -> tuple[bool, str]:
        return self.approver(step, executor, args, reason)

    def can_ask(self) -> bool:
        return self.asker is not None

    def ask_user(self, question: Question) -> tuple[str | None, str]:
        if self.asker is None:
            return None, "no-asker"
        return self.asker(question)

    def call_builtin(self, name: str, args: dict[str, Any], *, step: int, approval: dict[str, Any] | None = None,
                     models: Models | None = None) -> tuple[dict[str, Any], list[Any]]:
        # The scheduler's service records its own events as it acts.
        confirm = self._confirm_at(step, name) if self.confirmer is not None else None
        service = ScheduleService(self.runtime, actor=self.principal, policy=self.actors, confirm=confirm, models=models)
        return call_tool(service, name, args, approval), []

    def _confirm_at(self, step: int, name: str) -> Callable[[dict[str, Any]], tuple[bool, str]]:
        confirmer = self.confirmer
        assert confirmer is not None

        def confirm(shown: dict[str, Any]) -> tuple[bool, str]:
            return confirmer(step, name, shown, "save this schedule? it fires at the times shown")

        return confirm

    def mnest_boost(self, ranking: dict[str, Any], context: list[str]) -> dict[str, Any] | None:
        _, record = boost(ranking, self._mnestome(), context, catalogue=self._catalogue_names())
        return record if record["boosts"] else None

    def mnest_suggest(self, name: str, args: dict[str, Any], invoked: dict[int, tuple[str, str]], step: int) -> dict[str, Any] | None:
        try:
            return suggest(self._mnestome(), name, args, invoked, current_step=step, catalogue=self._catalogue_names())
        except Exception:  # noqa: BLE001 - a suggestion must never break the turn (seeds/002 ch. 11.1.1)
            return None

    def mnest_hint(self, name: str, context: list[str], step: int) -> dict[str, Any] | None:
        return telos_hint(self._mnestome(), name, context)

    def _mnestome(self) -> dict[str, Any]:
        """The mnestome this turn may read: a guest's leaves out the host's private mnests."""
        state = self.runtime.mnestome.state()
        return state if self.principal == HOST else without_private(state)

    def _catalogue_names(self) -> set[str]:
        return {le.name for le in self.runtime.report.loaded}
