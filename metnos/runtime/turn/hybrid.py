"""Online and hybrid turns in the loop: when a plan is asked for, and what it is asked with.

online: the turn starts with one planning call (metnos/runtime/turn/online.py) and
follows the plan; a failed step gets one recovery call; then the turn ends
with what it has, never handing back to a step-by-step model.

hybrid: the turn runs locally and escalates to one online plan, by the rules
of ``[runtime.hybrid]``: a request that starts with the user's marker, a
call the local model proposes to an executor (or capability) listed as
critical, a local step that failed, or the local loop ending without an
answer (a cap, unusable replies). Each escalation is a ``ModeEscalated``
event with its reason; what was sent is on the ``LLMAsked`` event.

Every call goes through the loop's model port, so replay feeds the
recorded replies back and reaches the same plans.
"""

from __future__ import annotations

import time
from typing import Any

from domain.turn import Turn
from domain.canonical import canonical_hash
from metnos.runtime.cascade.player import PlanPlayer
from metnos.mechanisms.llm.errors import LLMError, ProviderUnreachable
from metnos.runtime.turn.call_schema import plan_constraint
from metnos.runtime.turn.failures import FailureKind
from metnos.runtime.turn.filler import FILLER_RULE
from metnos.runtime.turn.judge import capabilities_of
from metnos.runtime.turn.prompt import asked_in
from metnos.runtime.turn.online import ONLINE_PROMPT, PlanUnreadable, planner_messages, read_plan, recovery_messages, shift
from metnos.settings import i18n
from metnos.settings.runtime import recorded_runtime
from metnos.runtime.turn.side_call import sent_form

ONLINE, HYBRID = "online", "hybrid"


class PlanFailed(Exception):
    """No usable plan: the loop ends the turn with ``detail`` (the model's fault, or the step's)."""

    def __init__(self, detail: str, *, llm_error: LLMError | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.llm_error = llm_error

    def failure(self, problem: tuple[FailureKind, str] | None) -> tuple[FailureKind, str]:
        """How the turn fails: the model could not be asked, or answered no plan; else the step that went wrong."""
        if self.llm_error is not None:
            return (FailureKind.PROVIDER_UNREACHABLE if isinstance(self.llm_error, ProviderUnreachable) else FailureKind.BAD_LLM_REPLY), self.detail
        return problem if problem is not None else (FailureKind.BAD_LLM_REPLY, self.detail)


class OnlineDriver:
    """The loop's online planning, for one turn (``loop`` gives the recording, the ports, the catalogue)."""

    def __init__(self, loop: Any, runtime: dict[str, Any] | None) -> None:
        self.loop = loop
        self.config = recorded_runtime(runtime)

    # Which tier plans: online mode's own, or the escalation's.
    def tier(self, request: Any) -> str:
        return self.config.online_tier if request.mode == ONLINE else self.config.hybrid.online_tier

    def starts_online(self, request: Any) -> str | None:
        """Why the turn plans online from its start, or None."""
        if request.mode == ONLINE:
            return "mode online"
        if request.mode == HYBRID and request.text.lstrip().startswith(self.config.hybrid.marker):
            return f"the request is marked {self.config.hybrid.marker}"
        return None

    def critical(self, request: Any, name: str) -> str | None:
        """Why a call the local model proposes escalates a hybrid turn, or None."""
        if request.mode != HYBRID:
            return None
        wanted = set(self.config.hybrid.critical)
        if name in wanted:
            return f"{name} is listed as critical"
        te = self.loop.catalogue.get(name)
        held = sorted(capabilities_of(te.loaded) & wanted) if te is not None else []
        return f"{name} holds {', '.join(held)}, listed as critical" if held else None

    def escalates_on_failure(self, request: Any, state: Any, *, cap: bool) -> bool:
        if request.mode != HYBRID or state.escalated:
            return False
        return self.config.hybrid.on_cap if cap else self.config.hybrid.on_local_failure

    def escalate(self, turn: Any, state: Any, request: Any, pool: list[str], reason: str) -> None:
        state.escalated = True
        self.loop.record(turn, Turn.ModeEscalated, round=state.round, reason=reason, tier=self.tier(request))
        self.propose(turn, state, request, pool)

    def propose(self, turn: Any, state: Any, request: Any, pool: list[str], *, failure: str | None = None) -> None:
        """One planning call (a recovery when ``failure`` is given); the plan becomes the turn's plan."""
        tools = self.loop.catalogue.tools(pool, with_scratchpad=False)
        if failure is None:
            messages, role = planner_messages(asked_in(request.text, turn.language), tools, self._prompt()), "online"
        else:
            done = [{"step": n, "executor": name, "output": state.observations.get(n)} for n, (name, _) in sorted(state.executed.items())]
            messages, role = recovery_messages(asked_in(request.text, turn.language), tools, done, failure, self._prompt()), "recovery"
        tier = self.tier(request)
        sent = sent_form(messages)
        state.round += 1
        self.loop.record(turn, Turn.LLMAsked, round=state.round, tier=tier, request_digest=canonical_hash({"messages": sent, "tools": []}),
                          tools=[t.name for t in tools], role=role, sent=sent)
        started = time.perf_counter()
        try:
            # The plan held to its form over the offered tools, where the server takes a grammar (call_schema.py).
            reply = self.loop.ports.ask_llm(tier, messages, [], constraint=plan_constraint(tools, recovery=failure is not None))
        except LLMError as e:
            self.loop.record(turn, Turn.LLMFailed, round=state.round, error_type=e.kind, message=str(e))
            raise PlanFailed(str(e), llm_error=e) from None
        self.loop.record(turn, Turn.LLMReplied, round=state.round, reply=reply.to_record(), intent_ms=int((time.perf_counter() - started) * 1000))
        try:
            plan = shift(read_plan(reply.text), state.step, fillers=self.config.fillers)
        except PlanUnreadable as e:
            self.loop.record(turn, Turn.OnlinePlanProposed, round=state.round, plan=None, problem=str(e), recovery=failure is not None)
            if failure is None and not state.recovered:
                state.recovered = True
                self.propose(turn, state, request, pool, failure=f"your reply was not a plan: {e}")
                return
            raise PlanFailed(i18n.english("turn.plan.not_a_plan", error=e)) from None
        self.loop.record(turn, Turn.OnlinePlanProposed, round=state.round, plan=plan, problem=None, recovery=failure is not None)
        self.loop.commit(turn)
        state.plan, state.online = PlanPlayer(plan, None), True

    def _prompt(self) -> str:
        # The user's words for the online role go after the instructions, before the tool list.
        added = self.config.prompts.get("online", "").strip()  # type: ignore[call-overload]
        base = ONLINE_PROMPT + (FILLER_RULE if self.config.fillers else "")
        return f"{base}{added}\nTools:\n" if added else base + "Tools:\n"

    def plan_failed(self, turn: Any, state: Any, request: Any, pool: list[str], reason: str) -> None:
        """An online plan's step or answer went wrong: one recovery call, then the turn ends (PlanFailed)."""
        if state.recovered:
            raise PlanFailed(reason)
        state.recovered = True
        self.propose(turn, state, request, pool, failure=reason)
