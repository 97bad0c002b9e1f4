"""An answer holds up against the turn's results (metnos/runtime/turn/grounding.py), and an exact ask is worked out by a step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from domain.turn import Turn
from metnos.mechanisms.llm.messages import AssistantMessage, ToolCall, UserMessage
from metnos.runtime.turn.composing import listing, textual, worked_out
from metnos.runtime.turn.conversation import EARLIER_DATA, earlier_data
from metnos.runtime.turn.grounding import (StepData, after_a_loop, check_answer, cut_short, repair_prompt, sort_key, superlative_order,
                                           working_out_call)
from metnos.runtime.turn.offering import acts
from metnos.runtime.turn.rules.answers import answer_from_data
from metnos.runtime.turn.rules.base import Answer, AnswerInstead, BaseRule, SendBack, Step, Unfounded, Verdict
from metnos.runtime.turn.turn_state import AnswerFromData, EndTurn


class Grounded(BaseRule):
    """``answered`` only for an answer that holds up against the turn's results: one that does
    not is sent back to the model once (told, for an exact ask, which tool works it out); then
    Metnos works the exact ask out with a step of its own; otherwise the answer is unfounded."""
    name = "grounded"

    def on_observation(self, step: Step) -> None:
        if step.kind != "executor":
            return
        # Told to work an exact ask out with a tool, the model keeps its tools until a step does.
        if worked_out(step.name):
            step.state.working_out = False
        config = step.loop.online.config
        if config.grounding_whole_lists or config.grounding_whole_counts:
            fed = step.resolution.pipings if step.resolution is not None else ()
            if cut_short(step.observation) or any(p.src_step in step.state.cut_short for p in fed):
                step.state.cut_short.add(step.number)

    def on_conclusion(self, answer: Answer) -> Verdict | None:
        state, loop = answer.state, answer.loop
        steps = [StepData(state.executor_of(n), worked_out(state.executor_of(n)), state.observations[n], state.sources.get(n, ""),
                          partial=n in state.cut_short)
                 for n in state.successes()]
        # What an earlier turn of the conversation found may be said again ("the first line was ..."), by a
        # turn that took no step of its own: one that looked again answers from what it found now.
        earlier = [] if steps else [StepData(EARLIER_DATA, False, d) for d in earlier_data(answer.request.conversation)]
        # What the turn told the model is data too: the next firing of the schedule a builtin made, the
        # step an action not done twice was done at.
        told = [StepData(name, False, result) for _, (name, result) in sorted(state.told.items())
                if loop.online.config.grounding_reads_told]
        # A scheduled request's "first line" is worked out by the schedule at each run, not by this turn.
        grounding = check_answer(answer.text, request=answer.request.text, steps=[*earlier, *steps, *told], home=loop.shown_home, exact=not state.scheduled,
                                 names=loop.catalogue.machine_names, whole=loop.online.config.grounding_whole_asks,
                                 quoted_names=loop.online.config.grounding_quoted_names,
                                 verdicts=loop.online.config.grounding_verdicts,
                                 verdict_words=loop.catalogue.verdict_words if loop.online.config.grounding_verdict_words else None,
                                 names_without_steps=loop.online.config.grounding_names,
                                 named_data=loop.online.config.grounding_named_data,
                                 picks_named=loop.online.config.grounding_picks_named,
                                 slice_end=loop.online.config.grounding_slice_end,
                                 whole_lists=loop.online.config.grounding_whole_lists,
                                 whole_counts=loop.online.config.grounding_whole_counts)
        if (grounding.holds and state.looped and not state.acted and answer.source == "model"
                and loop.online.config.grounding_after_loop):
            grounding = replace(grounding, bare=after_a_loop(answer.text, answer.request.text, [*earlier, *steps, *told],
                                                             home=loop.shown_home, names=loop.catalogue.machine_names))
        if grounding.holds:
            return None
        answer.record(Turn.AnswerUngrounded, round=state.round, text=answer.text[:2000],
                      unmatched=list(grounding.unmatched), exactness=grounding.exactness,
                      **({"denied": list(grounding.denied)} if grounding.denied else {}),
                      **({"bare": grounding.bare} if grounding.bare else {}))
        if answer.repairable and not state.grounding_repaired:
            state.grounding_repaired = True
            hint = None
            ask = state.exact
            if grounding.exactness and ask is not None and steps:
                state.working_out = True
                source = data_step(state, whole_lists=loop.online.config.grounding_whole_lists)
                hint = working_out_call(ask, working_out_tools(loop), source, textual=textual(state.observations[source]),
                                        **sort_by(answer))
            return SendBack((AssistantMessage(text=answer.text), UserMessage(repair_prompt(grounding, hint))))
        if grounding.exactness and not state.worked_out_by_runtime:
            worked = work_out(answer)
            if worked is not None:
                return AnswerInstead(worked)
        if state.answer_from and not grounding.exactness and not grounding.bare and not state.answered_from_data:
            # It asked twice for data the turn holds, then said what that data does not (the 1.5B read a
            # file, then answered that it did not exist): the answer is the data, where data answers.
            state.answered_from_data = True
            try:
                return AnswerInstead(answer_from_data(loop, answer.turn, state, answer.request, answer.pool, AnswerFromData(state.answer_from)))
            except EndTurn:
                return Unfounded(grounding)
        return Unfounded(grounding)


def work_out(answer: Answer) -> str | None:
    """The exact ask the answers missed, worked out by a step Metnos proposes itself
    (the call the tool's own arguments give, on the last good step's data), and the
    answer composed from its result; None when no offered tool does it or it failed."""
    state, loop = answer.state, answer.loop
    state.worked_out_by_runtime = True
    ask = state.exact
    good = state.successes()
    if ask is None or not good:
        return None
    source = data_step(state, whole_lists=loop.online.config.grounding_whole_lists)
    proposed = working_out_call(ask, working_out_tools(loop), source, textual=textual(state.observations[source]),
                                **sort_by(answer))
    if proposed is None:
        return None
    state.step += 1
    call = ToolCall(id="working-out", name=proposed["name"], arguments=proposed["arguments"])
    observation, others = loop.step(answer.turn, state, answer.request, answer.pool, call, "working_out")
    loop.commit(answer.turn, *others)
    if observation.get("ok") is False:
        return None
    answer.record(Turn.AnswerComposed, from_steps=[state.step], reason="exact_ask")
    return listing(observation, loop.shown_home)


def data_step(state: Any, *, whole_lists: bool) -> int:
    """The step whose data an exact ask is worked out of: the last good step that got data, not one
    that already worked some out (the first line of a list, "# Todo", holds none of its items), and,
    with ``whole_lists``, one whose list no limit cut when there is one (a listing of one file of three
    holds no newest)."""
    good = state.successes()
    found = [n for n in reversed(good) if not worked_out(state.executor_of(n))]
    whole = [n for n in found if n not in state.cut_short] if whole_lists else found
    return next(iter(whole), found[0] if found else good[-1])


def sort_by(answer: Answer) -> dict[str, Any]:
    """What a sort that works the ask out takes: the list and the field the request names, and the order."""
    state, request = answer.state, answer.request.text
    key = sort_key(request, [(n, state.observations[n]) for n in state.successes()])
    return {"key": key, "order": superlative_order(request)}


def working_out_tools(loop: Any) -> dict[str, set[str]]:
    """Every executor without side effects, by its argument names: working an exact ask
    out changes nothing, so it is not bound to the shortlist the model was offered."""
    pure = sorted(n for n in loop.catalogue.executors if not acts(loop.catalogue, n))
    return {t.name: set(t.parameters.get("properties", {})) for t in loop.catalogue.tools(pure, with_scratchpad=False)}
