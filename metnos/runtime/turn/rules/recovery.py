"""What a step's outcome means for the turn: a failure is its problem until a later step succeeds (docs/turns.md, "A loop that recovers")."""

from __future__ import annotations

import re

from domain.provenance import DIALOG, MODEL, REQUEST, leaves
from domain.turn import Turn
from metnos.mechanisms.sandbox.policy import place_arguments
from metnos.runtime.step.text import content_tokens
from metnos.runtime.turn.failures import FailureKind, step_failure_words
from metnos.runtime.turn.offering import actions_offered, acts
from metnos.runtime.turn.rules.base import BaseRule, Round, Step, Verdict
from metnos.settings import i18n

# Where a value is the user's own words.
USERS_WORDS = frozenset({REQUEST, DIALOG})


class Recovery(BaseRule):
    """A step that could not run, or an action that reports it could not be done, is the turn's
    problem; what succeeds after it is what an answer must rest on; an action that goes through
    after a failure did what was asked."""
    name = "recovery"

    def on_observation(self, step: Step) -> None:
        state = step.state
        if step.kind != "executor":
            if step.succeeded:
                state.went_well(step.observation)
            return
        if not step.ran:
            # The executor could not do its work at all (crash, timeout, sandbox):
            # unlike an answer that reports a missing file, that is the turn's problem.
            kind = FailureKind.STEP_REFUSED if step.result_kind == "PolicyViolation" else FailureKind.STEP_FAILED
            state.problem, state.since_problem = (kind, step_failure_words(step.name, step.observation)), []
        elif not step.succeeded and (acts(step.loop.catalogue, step.name) or piped(step) or guessed(step)
                                     or not (state.remediating or of_what_the_user_named(step))):
            # An action that reports it could not be done (a message to an unknown channel) is
            # the turn's problem too: the 1.5B answered that it had told someone after such a send.
            # So is a step on an earlier step's data that failed: the data was there, so what it
            # reports is how it was called (no such field), not a fact about the world to answer
            # with (the 1.5B answered a count with "the filter could not be applied"). So is a read
            # on a name the model made up: what it reports missing is the guess, not the user's world.
            # And a read of no path or URL the user named (a mail folder, a calendar): the 1.5B took
            # the request's sender for a mail folder, and answered that what was asked "is not
            # available" after the read said only that there is no such folder. (A prerequisite the
            # runtime runs to remedy a call reports its failure through the remedy.)
            state.problem, state.since_problem = (FailureKind.STEP_FAILED, step_failure_words(step.name, step.observation)), []
        elif step.succeeded and not state.remediating and (guess := found_nothing_on_a_guess(step)) is not None:
            # "Nothing" found with a filter of the model's own words is no fact either: the 1.5B
            # searched the mail from a sender it made up, since a day nobody said.
            state.problem, state.since_problem = (FailureKind.STEP_FAILED, guess), []
        elif step.succeeded:
            state.went_well(step.observation)
            if step.transition is not None and step.transition.category == "A":
                # An action that went through after a failure did what was asked;
                # its answer reports it ("saved") rather than quoting its output.
                state.problem, state.since_problem = None, []


class ClimbTier(BaseRule):
    """After a step went wrong, the next round asks the tier above (``[runtime]`` tiers), once for each problem."""
    name = "climb_tier"

    def on_ask(self, round: Round) -> Verdict | None:
        state = round.state
        if state.problem is None or state.problem is state.climbed_for:
            return None
        state.climbed_for = state.problem
        higher = round.loop.online.config.tier_above(state.tier)
        if higher is not None:
            round.record(Turn.TierEscalated, round=state.round, from_tier=state.tier, to_tier=higher, reason=state.problem[1])
            state.tier = higher
        return None


class Presentation(BaseRule):
    """A presentation step (describe, render) that closes a request that changes nothing: what it made is the answer."""
    name = "presentation"

    def on_observation(self, step: Step) -> None:
        if (step.kind == "executor" and step.succeeded and step.transition is not None and step.transition.category == "F"
                and step.state.plan is None and not actions_offered(step.loop.catalogue, step.pool)):
            step.state.presented = step.number


def guessed(step: Step) -> bool:
    """A text argument of the call is the model's own (domain/provenance.py): neither the request,
    a setting, the user's answer nor an earlier result holds it (the 1.5B named a mail folder of
    its own and answered that what was asked for was not there)."""
    return any(origin.kind == MODEL and isinstance(value, str) and value.strip()
               for path, value in leaves(step.arguments).items() if (origin := step.provenance.get(path)) is not None)


def found_nothing_on_a_guess(step: Step) -> str | None:
    """Why an empty result of a read is no fact, in words, when it is one: every list it returned is
    empty and a text argument is the model's own, sharing no word with the request (a date the model
    worked out from a weekday the user said is not a guess: an empty calendar answers whether an evening is free)."""
    lists = [v for v in step.observation.values() if isinstance(v, list)] if isinstance(step.observation, dict) else []
    if not lists or any(lists) or acts(step.loop.catalogue, step.name):
        return None
    asked = content_tokens(step.request.text)
    guesses = [f"{path} {value!r}" for path, value in sorted(leaves(step.arguments).items())
               if (origin := step.provenance.get(path)) is not None and origin.kind == MODEL and isinstance(value, str)
               and not _DAY.match(value.strip()) and content_tokens(value) and not content_tokens(value) & asked]
    if not guesses:
        return None
    return i18n.english("turn.guess", name=step.name, guesses=" and ".join(guesses))


# A day or a time written as a date (ISO 8601): worked out from the request's words, not made up.
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2})?)?")


def of_what_the_user_named(step: Step) -> bool:
    """The read reaches a place (a path, a URL) the user named, in the request or an answer: what it
    reports missing ("no such file") is then a fact of their world, which an answer may give."""
    if step.te is None:
        return True
    for pointer, _ in place_arguments(step.arguments, step.te.loaded.input_schema):
        dotted = ".".join(part.replace("~1", "/").replace("~0", "~") for part in pointer.strip("/").split("/"))
        origin = step.provenance.get(dotted)
        if origin is not None and origin.kind in USERS_WORDS:
            return True
    return False


def piped(step: Step) -> bool:
    """The step worked on data an earlier step made (``from_step``, ``{{stepN.field}}``)."""
    return step.resolution is not None and bool(step.resolution.pipings)
