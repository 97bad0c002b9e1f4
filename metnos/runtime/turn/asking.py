"""Asking the model for the next calls, or, once the data answers the request, for words only.

Every call goes through the loop's model port (``ask_llm``), recorded as
``LLMAsked`` (the digest of what was sent) and ``LLMReplied`` (the whole reply),
so replay feeds the recorded reply back.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from domain.turn import Turn
from domain.canonical import canonical_hash
from metnos.mechanisms.llm.errors import LLMError, ProviderUnreachable
from metnos.mechanisms.llm.messages import LLMReply, Message, UserMessage
from metnos.runtime.turn.failures import FailureKind
from metnos.runtime.turn.prompt import answer_from_results, asked_in
from metnos.runtime.turn.shown import call_as_text, elapsed_ms, message_record
from metnos.runtime.step.schedule_tools import SCHEDULED_CALLS
from metnos.runtime.turn.call_schema import planner_constraint
from metnos.runtime.turn.turn_state import AnswerFromData, EndTurn, TurnRequest, TurnState


def ask_model(loop: Any, turn: Turn, state: TurnState, request: TurnRequest, pool: list[str], messages: list[Message], *,
              words_only: bool) -> LLMReply:
    """Ask the model for the next calls or, once the data answers (``words_only``: a rule said so) or the
    pipeline is closed (``state.final_only``), for words only (tool_choice "none"); told to work an exact
    ask out with a tool (``state.working_out``), it keeps its tools."""
    words_only = (state.final_only or words_only) and not state.working_out
    # Asked for words only, the model still sees the tools of the round before, with
    # tool_choice "none": the prompt keeps that round's prefix, which the server's prompt
    # cache reuses, where a prompt without tools is evaluated again from its first token.
    tools = loop.catalogue.tools(pool, with_scratchpad=state.has_scratch, step_refs=bool(state.observations))
    if words_only and not state.final_only and not state.asked_for_words:
        state.asked_for_words = True
        messages.append(UserMessage(answer_from_results(asked_in(request.text, turn.language))))
    choice = "none" if words_only else "auto"
    asked: dict[str, Any] = {"messages": [message_record(m) for m in messages], "tools": [t.name for t in tools]}
    if words_only:
        asked["tool_choice"] = choice
    loop.record(turn, Turn.LLMAsked, round=state.round, tier=state.tier, request_digest=canonical_hash(asked), tools=[t.name for t in tools])
    started = time.perf_counter()
    try:
        with loop.interrupts.waiting_as(state, "while waiting for the model"):
            # The round's reply held to the calls it accepts, or to words (call_schema.py).
            constraint = planner_constraint(callable_tools(state, tools), state.observations, words_only=words_only,
                                            schedulable=schedulable(loop, tools))
            reply = loop.interrupts.abandonable(lambda: loop.ports.ask_llm(state.tier, messages, tools, tool_choice=choice,
                                                                           constraint=constraint))
    except LLMError as e:
        loop.record(turn, Turn.LLMFailed, round=state.round, error_type=e.kind, message=str(e))
        kind = FailureKind.PROVIDER_UNREACHABLE if isinstance(e, ProviderUnreachable) else FailureKind.BAD_LLM_REPLY
        raise EndTurn(kind, str(e)) from None
    loop.record(turn, Turn.LLMReplied, round=state.round, reply=reply.to_record(), intent_ms=elapsed_ms(started))
    if words_only and not state.final_only and not reply.is_final:
        if state.answer_from:
            # Told that the data is there, then asked for words, it calls a tool: the answer is the data.
            raise AnswerFromData(state.answer_from)
        # A server that ignores tool_choice "none" may still send a call: it is not what was asked.
        reply = dataclasses.replace(reply, text=call_as_text(reply), tool_calls=(), call_form="none")
    return reply


def callable_tools(state: TurnState, tools: list[Any]) -> list[Any]:
    """The tools the round's grammar admits a call to: not one whose failed call the model has already
    proposed again word for word. Told once that it failed, a small model sends it to the step cap; the
    prompt still lists the tool (its prefix stays the one the server's cache holds), the grammar
    offers the other tools and the answer. Nor one whose call was just intercepted for data the turn
    holds, until another step runs: offered it again, the 1.5B asked for the same folder twice more and
    answered from its listing, never calling the tool beside it that had what was asked."""
    barred = {name for name, _arguments in state.repeated_failures}
    barred |= {name for name, at in state.duplicated.items() if not any(step > at for step in state.executed)}
    return [t for t in tools if t.name not in barred]


def schedulable(loop: Any, tools: list[Any]) -> list[Any]:
    """The executors a scheduling call may name when the round offers it alone: the catalogue's."""
    if not any(t.name in SCHEDULED_CALLS for t in tools):
        return []
    return loop.catalogue.tools(sorted(loop.catalogue.executors), with_scratchpad=False, step_refs=False)
