"""Running one turn on a booted runtime: the live ports, the catalogue, the sink."""

from __future__ import annotations

import dataclasses
import os
from contextlib import ExitStack
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import metnos
from domain.canonical import canonical_hash
from domain.household import HOST
from domain.turn import OPEN, Turn
from domain.errors import MetnosError
from metnos.runtime.lifecycle import revive_used
from metnos.runtime.mnestome.record import record_turn
from metnos.mechanisms.llm.router import LLMRouter
from metnos.mechanisms.unit_of_work import UnitOfWork
from metnos.settings.llm_tiers import tier_ladder
from metnos.settings.cascade import CascadeConfig
from metnos.settings.loader import Loaded, for_workspace
from metnos.runtime import actors
from metnos.runtime.booted import Runtime
from metnos.runtime.cascade.consult import Consultation, consultant_from_env
from metnos.runtime.cascade.contradiction import record_drops
from metnos.runtime.cascade.validator import plan_problems
from metnos.runtime.synt.reactive import leave_proposals
from metnos.mechanisms.sandbox import autonomy
from metnos.mechanisms.sandbox.bwrap import require_sandbox
from metnos.runtime.step.catalogue import TurnCatalogue, builtin_tools
from metnos.runtime.turn.conversation import continued, starting
from metnos.runtime.turn.interrupts import InterruptGate
from metnos.runtime.lease import TurnLease
from metnos.runtime.turn.quarantined import held_versions, notices_of, ranked
from metnos.runtime.turn.shortlist import read_as_no_change
from metnos.runtime.turn.loop import TurnLoop, TurnOutcome, TurnRequest
from metnos.runtime.step.policies import guard_policy, policy_checker
from metnos.runtime.turn.ports import Approver, Asker, LivePorts
from metnos.settings.runtime import runtime_for_turn
from projections.catalog import invocable


class LogSink:
    """A live turn's events go into one unit of work of the log, committed in one transaction
    when the turn closes, or earlier where the loop asks (``flush``: a person waits, or an
    executor changed the world): never one transaction a step.

    At the close of a turn, what passed from executor to executor is learnt
    into the mnestome (seeds/002 ch. 11.1), in the same last transaction. A
    failure to learn is reported and never stops the turn from being recorded.
    """

    def __init__(self, runtime: Runtime, *, learn: bool = True) -> None:
        self.runtime = runtime
        self.log = runtime.log
        self.learn = learn
        self._turn_events: list[Any] = []
        self.learning_error: str | None = None
        self._lease: TurnLease | None = None
        # The turn's unit of work, open from its first events to its close.
        self._work = ExitStack()
        self._unit: UnitOfWork | None = None
        self.transactions = 0

    def commit(self, aggregates: list[Any]) -> None:
        """The aggregates' pending events join the turn's unit of work; a turn that closes commits it."""
        pending = [a for a in aggregates if a.pending_events]
        extra: list[Any] = []
        closed = False
        for aggregate in pending:
            if isinstance(aggregate, Turn):
                if self._lease is None and isinstance(aggregate.pending_events[0], Turn.TurnStarted):
                    # Held from before the turn's first event until after its
                    # last: while it is held, nobody closes the turn as abandoned.
                    self._lease = TurnLease.take(self.runtime.workspace, str(aggregate.id))
                self._turn_events.extend(aggregate.pending_events)
                closing = aggregate.pending_events[-1]
                if self.learn and isinstance(closing, (Turn.TurnAnswered, Turn.TurnFailed)):
                    extra = [*self._mnests(closing.timestamp), *revive_used(self.runtime, self._turn_events, closing.timestamp)]
                closed = aggregate.status != OPEN
        if pending:
            if self._unit is None:
                self._unit = self._work.enter_context(self.log.unit_of_work())
            self.log.save(*pending, *extra)
        if closed:
            self._close()
            if self.learn:
                self._drop_contradicted()
            self.release()

    def flush(self) -> None:
        """Commit what the turn holds now, in one transaction (a person is about to wait, or the world changed)."""
        if self._unit is not None:
            self._unit.commit()

    @property
    def turn_events(self) -> list[Any]:
        return list(self._turn_events)

    def release(self) -> None:
        """Commit what is held (a turn that stopped on an error keeps what it did), then let the turn's lease go."""
        try:
            self._close()
        finally:
            if self._lease is not None:
                self._lease.release()
                self._lease = None

    def close(self) -> None:
        """The loop is over: commit what is held and end the turn's unit of work."""
        self._close()

    def _close(self) -> None:
        if self._unit is None:
            return
        unit, self._unit = self._unit, None
        try:
            self._work.close()
        finally:
            self.transactions += unit.transactions

    def _drop_contradicted(self) -> None:
        """The cascade templates this turn contradicted are dropped, in the log (metnos/runtime/cascade/contradiction.py)."""
        try:
            record_drops(self.runtime)
        except MetnosError as e:
            self.learning_error = str(e)

    def _mnests(self, at: Any) -> list[Any]:
        try:
            return record_turn(self.runtime, list(self._turn_events), at)
        except MetnosError as e:
            self.learning_error = str(e)
            return []


def turn_catalogue(runtime: Runtime) -> TurnCatalogue:
    state = runtime.catalogue_state()
    offered = invocable(state)
    loaded = [le for le in runtime.report.loaded if le.name in offered and offered[le.name]["version"] == le.version and offered[le.name]["origin"] == le.origin]
    held = held_versions(state)
    # The pre-filter index is built once per set of executors, not per turn (and a quarantined one's manifest read once).
    # The tools offer the names configured in it (calendars, address books, mail accounts): a change rebuilds.
    config = runtime.config or {}
    key = (tuple((le.name, le.version, le.digest) for le in loaded), held, canonical_hash(config))
    cached = getattr(runtime, "_turn_catalogue", None)
    if cached is None or cached[0] != key:
        cached = (key, TurnCatalogue(loaded, builtins=builtin_tools(), quarantined=ranked(held, runtime.report), config=config))
        runtime._turn_catalogue = cached  # type: ignore[attr-defined]
    return cached[1]


def plan_port(runtime: Runtime, catalogue: TurnCatalogue, checker: Callable[[Any, dict[str, Any]], None],
              env: Mapping[str, str], *, cache: bool, cascade: CascadeConfig | None = None) -> Callable[[str], dict[str, Any]]:
    """The cascade as the loop asks it (metnos/cascade); ``cache=False`` (``ask --no-cache``) records a miss."""
    if not cache:
        return lambda _text: Consultation(reason="no cache asked (--no-cache)").to_fields()
    consultant = consultant_from_env(runtime, lambda plan: plan_problems(plan, catalogue, checker), env, settings=cascade)
    return lambda text: consultant.consult(text).to_fields()


def runtime_record(section: Any, router: LLMRouter) -> dict[str, Any]:
    """[runtime] as the turn runs it, with the ladder of distinct tiers the proposer may climb."""
    settings = getattr(router, "settings", None)
    ladder = tier_ladder(settings, with_frontier=section.escalate_to_frontier) if settings is not None else []
    return section.model_copy(update={"tier_ladder": tuple(ladder)}).to_json()


def models_of(events: list[Any]) -> list[dict[str, str]]:
    """Each model call of a turn: its tier, its role and the model that answered."""
    calls: list[dict[str, str]] = []
    for e in events:
        if isinstance(e, Turn.LLMAsked):
            calls.append({"tier": e.tier, "role": e.role, "model": ""})
        elif isinstance(e, Turn.LLMReplied) and calls:
            calls[-1]["model"] = str(e.reply.get("model") or "")
    return calls


def withheld_changes(events: list[Any]) -> list[str]:
    """The executors with side effects a turn was not offered because the learned offer read its request as
    changing nothing."""
    return [name for e in events if isinstance(e, Turn.PrefilterRanked) for name in read_as_no_change(e.ranking or {})]


class EmptyRequest(MetnosError):
    """A request with nothing to do."""


def check_request(text: str) -> str:
    """Refuse a request that is empty or only blanks, before any model is asked or anything recorded."""
    if not text.strip():
        msg = 'the request is empty: say what you want, e.g. metnos ask "what time is it?"'
        raise EmptyRequest(msg)
    return text


def run_turn(
    runtime: Runtime,
    text: str,
    *,
    approver: Approver,
    router: LLMRouter | None = None,
    observer: Callable[[Any], None] | None = None,
    actor: str = "user",
    channel: str = "cli",
    env: Mapping[str, str] | None = None,
    wrap_llm: Callable[[Any], Any] | None = None,
    interrupts: InterruptGate | None = None,
    cache: bool = True,
    level: str | None = None,
    mode: str | None = None,
    overrides: Sequence[str] = (),
    settings: Loaded | None = None,
    asker: Asker | None = None,
    principal: str = HOST,
    conversation: str | None = None,
    new_conversation: bool = False,
    confirm_schedules: bool = False,
    caller: dict[str, Any] | None = None,
) -> TurnOutcome:
    """``asker`` asks the user a question on the channel (the atomic dialog); None: nobody can be asked.
    ``level`` is the autonomy level (``ask --autonomy``); None reads ``[runtime] autonomy`` of config.toml.
    ``overrides`` (``ask --set KEY=VALUE``) set ``[runtime]`` keys for this turn. ``settings``: those the
    caller read for this turn (a long-running host reads them at each turn); default, the command's own.
    ``conversation``: the key the turn's conversation goes by (a chat, the dashboard, ``cli``); None, a turn alone.
    ``new_conversation``: start a new one under that key rather than continue the last."""
    check_request(text)
    # The settings of this workspace, as the command loaded them (or as ``env`` gives them).
    loaded = settings if settings is not None else for_workspace(runtime.workspace, env)
    section = runtime_for_turn(loaded.settings.runtime, overrides, where=str(loaded.config_file))
    level = actors.level_for(principal, autonomy.parse_level(section.autonomy if level is None else level), loaded.settings.actors)
    # A schedule made by the turn is shown back for the user's yes (Telegram): confirming one's own
    # schedule is not an approval of an action, so a guest may give it.
    confirmer = approver if confirm_schedules else None
    approver = actors.approver_for(principal, approver, loaded.settings.actors)
    env = dict(os.environ if env is None else env)
    # A turn runs executors: where none may run, it does not start.
    require_sandbox(env)
    own_router = router is None
    if router is None:
        router = LLMRouter(loaded.llm(), runtime.workspace, env=env)
    talk = loaded.settings.conversation
    joined = None if conversation is None else starting(conversation) if new_conversation else continued(
        runtime, conversation, channel=channel, idle_minutes=talk.idle_minutes, keep=talk.turns)
    sink = LogSink(runtime)
    try:
        ports = LivePorts(runtime=runtime, router=router, approver=approver, clock=runtime.clock, ids=runtime.ids, autonomy=level,
                           asker=asker, principal=principal, confirmer=confirmer,
                           actors=loaded.settings.actors, caller=caller)
        if wrap_llm is not None:
            ports.ask_llm = wrap_llm(ports.ask_llm)  # type: ignore[method-assign]
        catalogue = turn_catalogue(runtime)
        checker = policy_checker(runtime, env, level)
        ports.consult_plans = plan_port(runtime, catalogue, checker, env, cache=cache, cascade=loaded.settings.cascade)  # type: ignore[attr-defined]
        loop = TurnLoop(
            ports=ports,
            catalogue=catalogue,
            settings=loaded.turn,
            policy=guard_policy(runtime, env),
            sink=sink,
            runtime_version=metnos.__version__,
            check_policy=checker,
            observer=observer,
            interrupts=interrupts,
        )
        outcome = loop.run(TurnRequest(text=text, actor=actor, channel=channel, autonomy=level, principal=principal,
                                       approvals=loaded.settings.actors.approvals_of(principal),
                                       mode=mode or section.mode, runtime=runtime_record(section, router), conversation=joined))
    finally:
        sink.release()
        if own_router:
            router.close()
    runtime.refresh()
    outcome = dataclasses.replace(outcome, models=models_of(sink.turn_events), quarantined=notices_of(sink.turn_events),
                                  withheld_changes=withheld_changes(sink.turn_events))
    if sink.learning_error is not None:
        outcome = dataclasses.replace(outcome, learning_error=sink.learning_error)
    # The reactive cascade: a gap compose could not close is left as a generation proposal.
    return leave_proposals(runtime, outcome, text)
