"""Before the model is asked: the shortlist of executors (the pre-filter, seeds/002 ch. 5) and the reads the request names."""

from __future__ import annotations

import time
from typing import Any

from domain.turn import Turn
from metnos.mechanisms.llm.messages import AssistantMessage, Message, ToolCall, ToolResult
from metnos.runtime.mnestome.boost import apply_boost
from metnos.runtime.turn.conversation import shortlist_text
from metnos.runtime.turn.intent_model import INTENT_PROMPT, extract_intent
from metnos.runtime.turn.offering import offered
from metnos.runtime.turn.shortlist import complete as complete_shortlist, first_by_words
from metnos.runtime.turn.shown import elapsed_ms, shown_content
from metnos.runtime.turn.sources import opening_reads
from metnos.runtime.turn.turn_state import TurnRequest, TurnState
from metnos.settings.llm_tiers import ROLE_TIERS


def shortlist(loop: Any, turn: Turn, request: TurnRequest, state: TurnState) -> list[str]:
    """The executors the model is offered: ranked (``PrefilterRanked``), then those the turn's autonomy offers.
    ``state`` learns which of them the request's own words rank first."""
    started = time.perf_counter()
    # A follow-up is ranked with the requests it follows ("and the last one?" names no tool).
    words = shortlist_text(request.conversation, request.text)
    ranking = loop.catalogue.index.query(words, pool_size=loop.settings.pool_size).to_json()
    # Executors strong mnests lead to from what the request matched rank
    # higher (seeds/004); the boost comes through a port and is recorded.
    context = [c["name"] for c in ranking["candidates"] if c.get("score", 0) > 0]
    record = loop.ports.mnest_boost(ranking, context)
    if record is not None:
        ranking = apply_boost(ranking, record)
    # What the request names brings its source; side effects it does not ask for are withheld: its own
    # words say which it asks for, not those of the turns it follows (a write before is not asked again).
    ranking = complete_shortlist(ranking, loop.catalogue.index, request.text, _intent_tools(loop, turn, request),
                                 offer=loop.settings.offer, pool_size=loop.settings.pool_size)
    loop.record(turn, Turn.PrefilterRanked, ranking=ranking, prefilter_ms=elapsed_ms(started))
    state.worded = first_by_words(ranking)
    # The turn's opening is committed before the model is asked: a turn killed after this is in
    # the log, and the next boot closes it as abandoned; the rest waits for the turn's close.
    loop.commit_now(turn)
    return [c["name"] for c in ranking["candidates"] if offered(loop.catalogue, request.autonomy, c["name"])]


def _intent_tools(loop: Any, turn: Turn, request: TurnRequest) -> tuple[str, ...]:
    """The executors the intent extractor names, when ``[runtime] intent = "model"``."""
    if loop.online.config.intent != "model":
        return ()
    tier = ROLE_TIERS["intent"]
    executors = [(e.name, e.summary) for e in loop.catalogue.index.entries if e.name not in loop.catalogue.builtins]
    found = extract_intent(lambda cls, **f: loop.record(turn, cls, **f), loop.ports.ask_llm, tier=tier, request_text=request.text,
                           executors=executors, system_prompt=loop.online.config.system_prompt("intent", INTENT_PROMPT))
    loop.record(turn, Turn.IntentExtracted, tools=list(found.tools), tier=tier, model=found.model, problem=found.problem)
    return found.tools


def open_reads(loop: Any, turn: Turn, state: TurnState, request: TurnRequest, pool: list[str], messages: list[Message]) -> None:
    """Read what the request names before the model is asked (metnos/runtime/turn/sources.py).
    Each read is a step like any other; one that fails (a file that does not
    exist yet) is recorded, left out of the conversation, and is not the
    turn's problem: the request may be about to create it."""
    for n, read in enumerate(opening_reads(request.text, loop.catalogue.executors), 1):
        state.step += 1
        call = ToolCall(id=f"opening-{n}", name=read.executor, arguments=dict(read.args))
        problem, since = state.problem, list(state.since_problem)
        observation, others = loop.step(turn, state, request, pool, call, "opening_read")
        loop.commit(turn, *others)
        if observation.get("ok") is False:
            state.problem, state.since_problem = problem, since
            continue
        messages.append(AssistantMessage(text="", tool_calls=(call,)))
        messages.append(ToolResult(call_id=call.id, name=call.name, content=shown_content(observation, loop.shown_home)))
        loop.interrupts.checkpoint()
