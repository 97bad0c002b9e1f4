"""The checks on a proposed answer (docs/turns.md, "Outcomes"): ``answered`` only with text that reads as an answer."""

from __future__ import annotations

import re

from domain import provenance as prov
from domain.turn import Turn
from metnos.mechanisms.llm.messages import UserMessage
from metnos.runtime.step.asked import asks_only_questions
from metnos.runtime.step.schedule_tools import SCHEDULE_TOOL
from metnos.runtime.turn.answers import NAMES_NOTHING, REASONS, admitted_failure, names_none_of, answer_problem, asks_for_a_figure, figures_from, grounded_in, is_a_figure
from metnos.runtime.turn.sources import opening_reads
from metnos.runtime.turn.recurrence import asks_for_now, asks_for_recurrence, recurrences, recurring_part
from metnos.runtime.turn.composing import compose_answer, worked_out
from metnos.runtime.turn.failures import FailureKind, step_failure_words
from metnos.runtime.turn.offering import actions_offered, acts, takes_what_it_finds
from metnos.runtime.step.piping import FROM_STEP, placeholders_in
from metnos.runtime.turn.prompt import ANSWER_NOW, FINAL_ONLY, PLACEHOLDER_CORRECTION, act_reminder, answer_correction
from metnos.runtime.turn.provenance import own_source
from metnos.runtime.turn.rules.provenance import builtin_provenance, scheduled_untrusted_origins, seen_by
from metnos.runtime.turn.rules.base import Answer, AnswerInstead, AnswerWith, BaseRule, End, Round, SendBack, Step, Verdict, WordsOnly
from metnos.runtime.turn.turn_state import READ_ONLY_MODEL_STEPS, AnswerFromData, EndTurn, TurnState
from metnos.settings import i18n


class AnswerOnly(BaseRule):
    """A request that changes nothing is answered in words once the data answers it (``answer_only``)."""
    name = "answer_only"

    def on_ask(self, round: Round) -> Verdict | None:
        return WordsOnly() if answer_only(round.loop, round.state, round.pool) else None


class Placeholders(BaseRule):
    """An answer that still holds ``{{stepN.field}}`` is sent back once."""
    name = "placeholders"

    def on_answer(self, answer: Answer) -> Verdict | None:
        state = answer.state
        if answer.source != "model" or not placeholders_in(answer.text) or state.corrections >= 1:
            return None
        state.corrections += 1
        return SendBack((answer.reply.to_message(), UserMessage(PLACEHOLDER_CORRECTION)))


class AnswerForm(BaseRule):
    """An empty reply, a tool name, raw tool output, a call written as text or a stub is sent back
    once with the reason (metnos/runtime/turn/answers.py); a second one is answered from the data
    when the turn holds some that answers, and otherwise fails the turn."""
    name = "answer_form"

    def on_answer(self, answer: Answer) -> Verdict | None:
        if answer.source != "model":
            return None
        state, loop, text = answer.state, answer.loop, answer.text
        # What the loop told the model, and what it tells any model at the end of a pipeline.
        # The user's own words, quoted in what the loop said, are the answer's words too ("the headline
        # on <url> is ..."), never an echo of the loop's instructions.
        told = [m.text.replace(answer.request.text, " ") for m in answer.messages[2:] if isinstance(m, UserMessage)]
        told += [FINAL_ONLY, ANSWER_NOW]
        if loop.online.config.runtime_hints_echoed:
            told += [text.replace(answer.request.text, " ") for text in state.instructions_given]
        problem = answer_problem(text, loop.tool_names, [o for o in state.observations.values() if isinstance(o, dict)], told,
                                 repeats=loop.online.config.repeated_answer_sent_back)
        if problem is None and says_nothing_found(answer):
            problem = NAMES_NOTHING
        if problem is None:
            return None
        if state.answer_corrections >= 1:
            if state.answer_from:
                return AnswerWith(state.answer_from)
            good = state.successes()
            if problem == "tool_call_as_text" and good and answer_only(answer.loop, state, answer.pool):
                # Asked twice to answer a request that changes nothing, it asks for
                # a tool again: the answer is what the good steps produced.
                return AnswerWith(good, "no_answer_after_data")
            acting = asks_for_action(answer)
            if problem in ("raw_tool_output", NAMES_NOTHING) and good and not acting:
                # Asked twice for words, it hands back a step's data as JSON again (the 1.5B,
                # after slicing the lines asked for): the answer is the data the chain ended with.
                return AnswerWith((good[-1],), "raw_output_repeated")
            return End(FailureKind.UNUSABLE_ANSWER, REASONS[problem])
        state.answer_corrections += 1
        answer.record(Turn.AnswerRejected, round=state.round, reason=problem, text=text[:2000])
        return SendBack((answer.reply.to_message(), UserMessage(answer_correction(REASONS[problem]))))


class ActionTaken(BaseRule):
    """A request that names an action is answered in words only once one of its actions ran:
    the model is reminded once; after that, or after a step went wrong, the turn ends."""
    name = "action_taken"

    def on_observation(self, step: Step) -> None:
        step.state.tried.add(step.name)
        if step.succeeded and acts(step.loop.catalogue, step.name):
            step.state.acted = True
            step.state.acted_steps.append(step.number)

    def on_answer(self, answer: Answer) -> Verdict | None:
        state, loop = answer.state, answer.loop
        if asks_only_questions(answer.request.text):
            # An action offered for a question is a means to its answer, not what was asked.
            return None
        if not not_acted(loop, state, answer.pool, answer.request.text):
            return self._each_asked(answer)
        # A plan (online, or the cascade's) that answers a request for an action without doing it ends here.
        if answer.source != "model" or state.problem is not None or state.reminded_to_act or state.final_only:
            return not_done(loop, state, answer.pool)
        state.reminded_to_act = True
        answer.record(Turn.AnswerRejected, round=state.round, reason="action_not_taken", text=answer.text[:2000])
        return SendBack((answer.reply.to_message(), UserMessage(act_reminder(actions_offered(loop.catalogue, answer.pool)))))


    @staticmethod
    def _each_asked(answer: Answer) -> Verdict | None:
        """A request that names several actions is answered once each has run: the 1.5B deleted the files,
        never sent the message the same request asked for, and answered that the files were deleted."""
        state, loop = answer.state, answer.loop
        if not state.acted:
            return None
        still = open_asks(loop, state, answer.request.text, answer.pool, done=loop.online.config.named_action_done)
        if not still:
            return None
        if (failed := failure_of(state, still)) is not None:
            return failed
        if answer.source != "model" or state.problem is not None or state.reminded_to_act or state.final_only:
            return End(FailureKind.ACTION_NOT_TAKEN, " and ".join(still))
        state.reminded_to_act = True
        answer.record(Turn.AnswerRejected, round=state.round, reason="action_not_taken", text=answer.text[:2000])
        return SendBack((answer.reply.to_message(), UserMessage(act_reminder(still))))


def open_asks(loop, state: TurnState, request: str, pool: list[str], *, done: bool = False) -> list[str]:
    """The actions the request names that no step has tried (``done``: that no step did), one
    executor for each, of those offered.

    Executors met by the same word of the request are one action, done by any of them: "delete"
    meets delete_files and delete_events, and a delete of files answers it even when the shortlist
    offered only the other. Without ``done``, a step that was tried and failed is not open here:
    its failure is reported by its own rule. But another action that went through after it clears
    that failure, and the request's is still not done (``[runtime] named_action_done``): the 0.5B,
    asked to move two files, failed the move and deleted them. A schedule made in the turn defers
    the actions it names.

    Only an action named by the verb of its executor's name counts ("delete", "send"): a tag met
    by a word of several uses is not held against the answer ("add up the column" is no append)."""
    index = getattr(loop.catalogue, "index", None)
    if index is None or state.scheduled:
        return []
    if done:
        tried = {state.executor_of(step) for step in state.successes()}
    else:
        tried = state.tried | {executor for executor, _ in state.executed.values()}
    actions: list[tuple[set[str], set[str]]] = []  # (request words, executors)
    for name, action in index.actions.asked(request).items():
        if name not in loop.catalogue.executors or not acts(loop.catalogue, name) or action.tag != (name.split("_")[0],):
            continue
        words, names = set(action.words), {name}
        for other in [a for a in actions if a[0] & words]:
            actions.remove(other)
            words |= other[0]
            names |= other[1]
        actions.append((words, names))
    return sorted(min(names & set(pool)) for _, names in actions if names & set(pool) and not names & tried)


def failure_of(state: TurnState, actions: list[str]) -> End | None:
    """How the last step that tried one of ``actions`` failed, or None when none was tried."""
    for number in sorted(state.observations, reverse=True):
        observation = state.observations[number]
        if state.executor_of(number) in actions and isinstance(observation, dict) and observation.get("ok") is False:
            return End(FailureKind.STEP_FAILED, step_failure_words(state.executor_of(number), observation))
    return None


class ScheduleMade(BaseRule):
    """A request for something to happen again and again ("every Friday at 17:00") is done by a
    schedule: an action with side effects proposed before one is made is refused (the 1.5B sent the
    message once, now, and answered that it had), and an answer without one gets one reminder, then
    the turn ends not done."""
    name = "schedule_made"

    def on_call(self, step: Step) -> Verdict | None:
        state = step.state
        when = _recurring(step.request.text, step.pool)
        if when is None or state.scheduled or step.name == SCHEDULE_TOOL or not acts(step.loop.catalogue, step.name):
            return None
        if asks_for_now(step.request.text):
            return None  # "delete it, and every hour from now on": once now, then the schedule.
        error = i18n.english("turn.schedule.not_yet", when=when)
        return step.reject("recurrence", {"when": when, "message": error}, {
            "ok": False, "error_class": "outside_request", "error": error,
            "hint": f"call {SCHEDULE_TOOL} with the executor and its arguments, to run {when}"})

    def on_resolved(self, step: Step) -> Verdict | None:
        """A schedule that carries what a step read now (a file's line, a page's text) would send that
        copy at every firing: the 1.5B scheduled "the first line of the meeting notes" as the line it read
        today. The reading belongs in the schedule, as a chain that reads at each firing."""
        if step.name != SCHEDULE_TOOL:
            return None
        builtin = step.loop.catalogue.builtins.get(SCHEDULE_TOOL)
        if builtin is not None and scheduled_untrusted_origins(step, builtin.targets(step.args)):
            return None  # a target taken from content is the provenance policy's to refuse, with its reason
        # A builtin's arguments are traced where the vaglio judges them; here too, before it asks.
        traced = step.provenance or {path: prov.Provenance.from_json(p) for path, p in builtin_provenance(step).items()}
        baked = next(((path, p) for path, p in sorted(traced.items())
                      if p.kind == prov.STEP and p.source in READ_NOW and path.startswith(("args.", "chain."))), None)
        if baked is None and step.loop.online.config.schedule_carries_reads:
            baked = _read_inside(step)
        if baked is None and step.loop.online.config.schedule_reads_named_sources:
            return _source_left_out(step)
        if baked is None:
            return None
        path, origin = baked
        error = i18n.english("turn.schedule.read_now", path=path, origin=origin.words())
        return step.reject("recurrence", {"argument": path, "origin": origin.to_json(), "message": error}, {
            "ok": False, "error_class": "outside_request", "error": error,
            "hint": f'call {SCHEDULE_TOOL} with "chain": the step that reads first, then the steps that use it with "from_step"'})

    def on_observation(self, step: Step) -> None:
        if step.name == SCHEDULE_TOOL and step.succeeded:
            step.state.scheduled = True
            request = step.request.text
            if step.loop.online.config.schedule_closes_turn and len(recurrences(request)) == 1 and not asks_for_now(request):
                # The one schedule the request asks for is made, and nothing is asked for now: the work is
                # done, and the next round asks for words (the 1.5B, its reminder made, went on to schedule
                # a mail read nobody asked for, again and again).
                step.state.final_only = True

    def on_answer(self, answer: Answer) -> Verdict | None:
        state = answer.state
        when = _recurring(answer.request.text, answer.pool)
        if when is None or state.scheduled:
            return None
        if state.problem is not None:
            # A schedule refused, declined or failed: that is the outcome.
            return End(*state.problem)
        if answer.source != "model" or state.reminded_to_schedule or state.final_only:
            return End(FailureKind.ACTION_NOT_TAKEN, SCHEDULE_TOOL)
        state.reminded_to_schedule = True
        answer.record(Turn.AnswerRejected, round=state.round, reason="action_not_taken", text=answer.text[:2000])
        return SendBack((answer.reply.to_message(), UserMessage(act_reminder([SCHEDULE_TOOL]))))


# What a step read that may say something else by the time a schedule fires.
READ_NOW = prov.FILE_CONTENT | {prov.WEB, prov.MAIL, prov.MCP, prov.CALENDAR}


def _read_inside(step: Step) -> tuple[str, prov.Provenance] | None:
    """The schedule's argument that holds a line a step read now inside a text of its own, and that step.

    The whole-value trace finds a line scheduled as it was read; the 1.5B wrote "The first line of the
    meeting is: <the line>" into the message, traced as the model's own text, and the schedule would have
    sent today's line every Friday (``[runtime] schedule_carries_reads``)."""
    values = {path: value for path, value in prov.leaves(step.args).items() if path.startswith(("args.", "chain."))}
    for seen in seen_by(step):
        if seen.source in READ_NOW and (carried := prov.piece_carried(values, seen.output, known=[step.request.text])):
            return carried[0], prov.Provenance(prov.STEP, step=seen.step, source=seen.source)
    return None


def _source_left_out(step: Step) -> Verdict | None:
    """A schedule none of whose arguments names a source the request names to read (a note's first line,
    every week) would fire without reading it: the 1.5B scheduled a reminder of its own words that never
    read the note, and the turn said `answered`. A source named in a step before the recurrence's ("read
    <page>, then every night ...") is read now, not each time."""
    said = [value for path, value in prov.leaves(step.args).items() if path.startswith(("args.", "chain.")) and isinstance(value, str)]
    for read in opening_reads(recurring_part(step.request.text), step.loop.catalogue.executors):
        tail = read.target[2:] if read.target.startswith("~/") else read.target
        if not any(read.target in value or tail in value for value in said):
            error = i18n.english("turn.schedule.source_unread", source=read.target)
            return step.reject("recurrence", {"argument": "chain", "source": read.target, "message": error}, {
                "ok": False, "error_class": "outside_request", "error": error,
                "hint": f'call {SCHEDULE_TOOL} with "chain": first {read.executor} of {read.target}, then the steps '
                        'that use it with "from_step"'})
    return None


def _recurring(request: str, pool: list[str]) -> str | None:
    """The recurrence the request asks for, when the turn can schedule it."""
    return asks_for_recurrence(request) if SCHEDULE_TOOL in pool else None


class SaysNotDone(BaseRule):
    """An answer that says what was asked could not be done is not ``answered``: the turn fails
    with the model's own words (the 0.5B answered "The total ... could not be done", and the
    turn said answered). Unless the action was done: a model that proposed the very action that had
    succeeded, was told it was done, and then said it could not be done (both models, deleting an event
    and moving files) is answered with what the action reported (``[runtime] done_not_denied``); so is
    one that says so with every step gone through (``[runtime] done_not_denied_once``). What the request
    named that no action did still fails the turn (answer_from_data)."""
    name = "says_not_done"

    def on_conclusion(self, answer: Answer) -> Verdict | None:
        state = answer.state
        said = admitted_failure(answer.text, [o for o in state.observations.values() if isinstance(o, dict)])
        if said is None:
            return None
        config = answer.loop.online.config
        # Every step went through: a "could not" is the model's word against what the actions reported (the 1.5B
        # made the weekly reminder asked for, then said "the step did not produce any data that could not be done").
        clean = config.done_not_denied_once and state.problem is None and not went_wrong_after(state, 0)
        if (config.done_not_denied and (state.action_repeated or clean) and state.acted_steps
                and not state.done_told_instead):
            state.done_told_instead = True
            try:
                return AnswerInstead(answer_from_data(answer.loop, answer.turn, state, answer.request, answer.pool,
                                                      AnswerFromData(tuple(state.acted_steps), "done_said_not_done")))
            except EndTurn:
                pass
        return End(FailureKind.SAID_NOT_DONE, said)


class RestsOnRecovery(BaseRule):
    """After a step went wrong, an answer must use what succeeded since (or, in a request that
    changes nothing, give only figures the good steps produced); otherwise the problem is the outcome.
    Unless, in a request that changes nothing, the model had been told that data it held answers and
    what went wrong came after (``[runtime] held_data_after_detour``): the answer is that data."""
    name = "rests_on_recovery"

    def on_answer(self, answer: Answer) -> Verdict | None:
        state = answer.state
        if answer.source != "model" or state.problem is None or grounded_in(answer.text, state.since_problem):
            return None
        if figures_stand(answer.loop, state, answer.pool, answer.text):
            return None
        detour = went_wrong_after(state, state.told_clean_at)
        if (state.answer_from and state.told_clean_at and answer.loop.online.config.held_data_after_detour
                and not asks_for_action(answer) and not state.acted
                and (not set(detour) & set(state.worded) or words_served(answer, state))):
            # Told the data was there, the 0.5B called another tool (mail, a page) that failed or was refused:
            # that detour changed nothing, and the data still answers (checked as any data is, answer_from_data).
            # Not when what went wrong is what the request's own words ask for.
            return AnswerWith(state.answer_from, "held_data_after_detour")
        return End(*state.problem)


def words_served(answer: Answer, state: TurnState) -> bool:
    """The data held is that of an executor the request's words rank first (``[runtime] held_data_words_served``):
    a detour to another they rank as high ("leggi" ranks a file and a page alike) is no part of what they ask."""
    return (answer.loop.online.config.held_data_words_served
            and bool({state.executor_of(n) for n in state.answer_from} & set(state.worded)))


def asks_for_action(answer: Answer) -> bool:
    """An action is offered and the request is not questions only."""
    return bool(actions_offered(answer.loop.catalogue, answer.pool)) and not asks_only_questions(answer.request.text)


def went_wrong_after(state: TurnState, step: int) -> list[str]:
    """The executors whose calls after ``step`` failed or were refused."""
    names = {name for (name, _arguments), at in state.failed_calls.items() if at > step}
    names |= {state.executor_of(n) for n, o in state.observations.items() if n > step and isinstance(o, dict) and o.get("ok") is False}
    return sorted(names - {""})


def says_nothing_found(answer: Answer) -> bool:
    """A request that changes nothing and asks for no figure, answered over a list the last good
    step found without naming any of it (the 0.5B listed ~/notes and answered "The markdown files
    in ~/notes were found.")."""
    state, loop = answer.state, answer.loop
    good = state.successes()
    if (not good or state.acted or state.problem is not None or state.exact is not None
            or actions_offered(loop.catalogue, answer.pool) or asks_for_a_figure(answer.request.text)):
        return False
    if _CLAIMS.search(answer.text):
        # A figure or a file name it gives is the grounding check's to verify, with what did not match.
        return False
    if _YES_OR_NO.match(answer.text) and asks_only_questions(answer.request.text):
        # A closed question ("is the office open on Sunday?") is answered by a yes or a no, which names
        # nothing of the list it rests on (the 1.5B's right answer to one was sent back).
        return False
    last = state.observations[good[-1]]
    return isinstance(last, dict) and names_none_of(answer.text, last)


_CLAIMS = re.compile(r"\d|\b\w+\.[A-Za-z0-9]{1,5}\b")
# A reply that opens with a yes or a no, as its own word ("No, it is closed.", "Sì."), not "No files".
_YES_OR_NO = re.compile(r"^\W*(yes|no|s[iì])\s*[,.;:!—–-]", re.IGNORECASE)


def not_acted(loop, state: TurnState, pool: list[str], request: str) -> bool:
    """A request that names an action is answered in words while none of its
    actions ran ("the largest file is x", and no message sent), and
    there was something to act on: the last good step did not find an empty list
    ("there are no .tmp files" is the answer to "delete the .tmp files"). With
    ``[runtime] empty_list_excuses_takers``, only an action that takes what was found
    (a move, a delete) is excused so: "add a line to my note" is not done by a slice
    that found no lines (the 0.5B's, answered with the runtime's own hint)."""
    offered = actions_offered(loop.catalogue, pool)
    if state.acted or not offered:
        return False
    good = state.successes()
    if not (good and state.observations[good[-1]].get("entries") == []):
        return True
    return loop.online.config.empty_list_excuses_takers and not any(map(takes_what_it_finds, named_actions(loop, request, offered)))


def named_actions(loop, request: str, offered: list[str]) -> list[str]:
    """The offered actions the request's words name; all those offered when its words name none."""
    index = getattr(loop.catalogue, "index", None)
    named = [name for name in (index.actions.asked(request) if index is not None else {}) if name in offered]
    return named or offered


def not_done(loop, state: TurnState, pool: list[str]) -> End:
    """How a turn that did not act ends: a step that failed, a fence or the user's no is
    the outcome; otherwise the action the request named was never taken."""
    if state.problem is not None:
        return End(*state.problem)
    return End(FailureKind.ACTION_NOT_TAKEN, " or ".join(actions_offered(loop.catalogue, pool)))


def figures_stand(loop, state: TurnState, pool: list[str], text: str) -> bool:
    """After a call that was refused for its form and would have changed nothing, in a
    request that changes nothing, an answer stands when every number in it is in the
    data the turn's good steps produced ("1284", read from the page, after a count
    piped from nowhere was refused); a number from nowhere ("8500" for files of 1000,
    2500 and 500 bytes) does not."""
    if state.problem is None or state.problem is not state.unrun_read or actions_offered(loop.catalogue, pool):
        return False
    good = [state.observations[s] for s in state.successes()]
    return figures_from(text, good)


def answer_only(loop, state: TurnState, pool: list[str]) -> bool:
    """A request that changes nothing (no executor with side effects made the
    shortlist) is answered once the model, holding data, takes a step that does
    not work on it (a small model offered tools calls one more read, and another,
    instead of answering), after three steps of its own, or once the last good
    step gave a single value rather than a list. While each step works on the
    list before it (read, then filter, then count), the chain goes on. A request
    that acts keeps its tools until its action closes the pipeline. A list that no offered
    tool takes is answered from at once."""
    if state.model_steps == 0 or state.has_scratch:
        # Spilled data is read back with scratchpad_read: that tool stays.
        return False
    if actions_offered(loop.catalogue, pool):
        return False
    if state.read_again or state.model_steps >= READ_ONLY_MODEL_STEPS:
        return True
    if state.exact is not None and any(worked_out(state.executor_of(n)) for n in state.successes()):
        # The exact ask is worked out: slicing the slice again gives nothing new (the 1.5B sliced three times).
        return True
    # A chain goes on from a list (filter it, sort it, count it); a single value (the
    # time, a sum, a description) is what the answer says. Offered tools after one,
    # the 0.5B asked for the time again.
    good = state.successes()
    if not good:
        return False
    if not isinstance(state.observations[good[-1]].get("entries"), list):
        return True
    # A list no offered tool works on is what the answer says: offered the calendar's read
    # alone, the 1.5B read the same afternoon twice more instead of answering.
    return not any(takes_a_list(loop.catalogue, name) for name in pool)


def takes_a_list(catalogue, name: str) -> bool:
    """Whether ``name`` works on an earlier step's list (its tool takes ``from_step``)."""
    found = catalogue.get(name)
    return found is not None and FROM_STEP in found.tool.parameters.get("properties", {})


def answer_from_data(loop, turn: Turn, state: TurnState, request, pool: list[str], found: AnswerFromData) -> str:
    """The answer made from the data the steps hold; EndTurn when that data answers nothing."""
    asked = [] if asks_only_questions(request.text) else actions_offered(loop.catalogue, pool)
    if asked and not state.acted:
        # The data is no answer to a request that asked for an action none of whose steps ran.
        raise EndTurn(FailureKind.ACTION_NOT_TAKEN, " or ".join(asked))
    if asked and loop.online.config.named_action_done and (still := open_asks(loop, state, request.text, pool, done=True)):
        # What another action reported is no answer to one the request named that never went through.
        failed = failure_of(state, still) or End(FailureKind.ACTION_NOT_TAKEN, " and ".join(still))
        raise EndTurn(failed.kind, failed.detail)
    used = list(found.steps)
    if state.acted_steps and found.reason != "presentation":
        # A request for an action is answered by what the action reported, not by data read on the
        # way (the 1.5B scheduled a message, then the answer was the file it had read).
        used = list(state.acted_steps)
    elif found.reason != "presentation" and asks_for_a_figure(request.text):
        # The data handed back would read as answered; only a figure worked out from it answers.
        used = [s for s in used if is_a_figure(state.observations.get(s, {}))]
        if not used:
            steps = ", ".join(str(s) for s in found.steps)
            raise EndTurn(FailureKind.UNUSABLE_ANSWER, i18n.english("turn.answer.figure_never_worked_out", steps=steps))
    if loop.online.config.data_asked_for and found.reason != "presentation" and not state.acted:
        # What an action reported answers the request that asked for it (the rules above saw to that).
        _hold_data_not_asked_for(state, used, request.text)
    # A builtin's result (a schedule made) is what the turn told the model, not an executor's observation.
    answer = compose_answer([state.observations.get(s) or state.told.get(s, ("", {}))[1] for s in used], request.text)
    if not answer:
        raise EndTurn(FailureKind.UNUSABLE_ANSWER, i18n.english("turn.answer.empty"))
    loop.record(turn, Turn.AnswerComposed, from_steps=used, reason=found.reason)
    return answer


def _hold_data_not_asked_for(state: TurnState, used: list[int], request_text: str) -> None:
    """Data is the answer when it is what the request's words ask for: that executor ran, or a step worked
    out the exact ask or the figure the request makes (the first item, the last lines, a total), or read
    the same kind of source itself (a page for a page). A folder listed because the request named it does
    not say what changed in it while nothing ran git; the first line of a page does not say until when
    a room is open."""
    if not state.worded or state.exact is not None:
        # An exact ask ("the last three lines") is worked out from the data by the rule on exactness
        # (Metnos runs the slice itself when the model did not): the data is its input, not its answer.
        return
    ran = {state.executor_of(s) for s in state.successes()}
    if ran & set(state.worded):
        return
    givers = sorted({state.executor_of(s) for s in used} - {""})
    if any(worked_out(g) for g in givers) and asks_for_a_figure(request_text):
        return
    # The giver's own kind, not what it was fed: a slice of a page is not the page.
    wanted_sources = {own_source(w) for w in state.worded} - {None}
    if wanted_sources & {own_source(g) for g in givers}:
        return
    steps = ", ".join(str(s) for s in used)
    raise EndTurn(FailureKind.UNUSABLE_ANSWER, i18n.english("turn.answer.data_not_asked_for", wanted=" or ".join(state.worded),
                                                            steps=steps, givers=", ".join(givers) or "a step"))
