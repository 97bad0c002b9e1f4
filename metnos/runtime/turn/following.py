"""A plan in the model's place: the cascade's (metnos/runtime/cascade) or an online one (metnos/runtime/turn/hybrid.py)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from domain.turn import Turn
from metnos.mechanisms.llm.messages import Message, ToolResult
from metnos.runtime.cascade.player import PlanPlayer
from domain.cascade.template import TemplateGap
from metnos.runtime.turn.answers import grounded_in
from metnos.runtime.turn.failures import FailureKind, step_failure_words
from metnos.runtime.turn.conversation import earlier_of
from metnos.runtime.turn.filler import FILLER_PROMPT, Filler, FillerFailed, has_fillers
from metnos.runtime.step.piping import placeholders_in
from metnos.runtime.turn.shown import elapsed_ms, shown_content
from metnos.runtime.turn.turn_state import EndTurn, TurnRequest, TurnState
from metnos.settings import i18n
from metnos.settings.llm_tiers import ROLE_TIERS


def consult_plans(loop: Any, turn: Turn, request: TurnRequest) -> PlanPlayer | None:
    """Ask the cascade for a plan (a port: replay gets the recorded answer)."""
    consult = getattr(loop.ports, "consult_plans", None)
    if earlier_of(request.conversation):
        # A plan is found by a request's words alone; a follow-up's words mean what its conversation makes them.
        return None
    started = time.perf_counter()
    found = consult(request.text) if consult is not None else None
    if found is None:
        return None
    loop.record(turn, Turn.PlanConsulted, **found, lookup_ms=elapsed_ms(started))
    loop.commit(turn)
    return PlanPlayer(found["plan"], found["entry"]) if found["plan"] is not None else None


def follow_plan(loop: Any, turn: Turn, state: TurnState, request: TurnRequest, pool: list[str], messages: list[Message]) -> str | None:
    """One round with the plan in the model's place: its next call, checked
    and run like any, or its answer. When a step or the answer goes wrong,
    the model takes over with what the plan did so far."""
    reply = state.plan.reply(state.step)
    filler = _filler(loop, turn, state, request) if state.online and loop.online.config.fillers else None
    if reply is None:
        try:
            # Written into a copy: the template is part of the recorded plan.
            filled = filler.fill_segments(state.plan.plan["answer"], state.observations) if filler is not None else None
            answer = state.plan.answer(state.observations, filled)
        except TemplateGap as gap:
            return _abandon(loop, turn, state, request, pool, str(gap))
        except FillerFailed as e:
            state.problem, state.since_problem = (FailureKind.BAD_LLM_REPLY, str(e)), []
            return _abandon(loop, turn, state, request, pool, str(e))
        left = placeholders_in(answer)
        if left:
            # Shown as is, the user would read "{{get_urls.result}}" as the answer.
            return _abandon(loop, turn, state, request, pool, i18n.english("turn.plan.placeholders_left", left=", ".join(left)))
        if state.online and state.problem is not None and not grounded_in(answer, state.since_problem):
            # An online plan's answer after a failed step must rest on what succeeded since.
            raise EndTurn(*state.problem)
        return answer
    call = reply.tool_calls[0]
    if filler is not None and has_fillers(call.arguments):
        try:
            arguments = filler.fill_value(dict(call.arguments), state.observations, step=state.step + 1, where="args")
        except FillerFailed as e:
            # Like a step that failed: the turn's problem unless a later step goes through.
            reason = i18n.english("turn.plan.step_not_written", step=state.step + 1, name=call.name, error=e)
            state.problem, state.since_problem = (FailureKind.STEP_FAILED, reason), []
            return _abandon(loop, turn, state, request, pool, reason)
        call = dataclasses.replace(call, arguments=arguments)
        reply = dataclasses.replace(reply, tool_calls=(call,))
    messages.append(reply.to_message())
    state.step += 1
    before = state.problem
    observation, others = loop.step(turn, state, request, pool, call, "plan")
    messages.append(ToolResult(call_id=call.id, name=call.name, content=shown_content(observation, loop.shown_home), is_error=observation.get("ok") is False))
    loop.commit(turn, *others)
    # An online plan after a recovery goes on past the earlier failure; only a new one stops it.
    if observation.get("ok") is False or (state.problem is not None and (not state.online or state.problem is not before)):
        words = step_failure_words(call.name, observation) if state.online and observation.get("ok") is False else ""
        reason = i18n.english("turn.plan.step_failed.because" if words else "turn.plan.step_failed", step=state.step, name=call.name, words=words)
        return _abandon(loop, turn, state, request, pool, reason)
    return None


def _filler(loop: Any, turn: Turn, state: TurnState, request: TurnRequest) -> Filler:
    return Filler(lambda cls, **f: loop.record(turn, cls, **f), loop.ports.ask_llm, tier=ROLE_TIERS["filler"],
                  request_text=request.text, system_prompt=loop.online.config.system_prompt("filler", FILLER_PROMPT),
                  round_of=lambda: state.round)


def _abandon(loop: Any, turn: Turn, state: TurnState, request: TurnRequest, pool: list[str], reason: str) -> None:
    loop.record(turn, Turn.PlanAbandoned, step=state.step, reason=reason)
    loop.commit(turn)
    state.plan = None
    if state.online:
        # An online plan gets one recovery call; after it, no model takes over.
        loop.online.plan_failed(turn, state, request, pool, reason)
