"""How a turn's outcome is told to a person: the same facts on every way in.

The ways in differ in medium (a terminal's two streams, JSON, a chat message,
a web page), never in what they say:

* ``answered``: the answer.
* ``unverified`` (the answer failed the check against what the steps
  returned, metnos/runtime/turn/grounding.py): never shown as an answer. The one line
  that says so, the parts of the text found in nothing the steps returned,
  then the model's text marked as unchecked. JSON keeps the text in
  ``answer``, beside ``status`` and ``failure.unmatched``.
* any other status: why there is no answer.
* whatever the status, each quarantined executor the request would have been
  offered (:mod:`metnos.runtime.turn.quarantined`): which, why, and the command that
  shows it.
* when the turn did not answer, the executors with side effects it was not offered
  because the learned offer read the request as changing nothing, and how to ask for
  the change.
"""

from __future__ import annotations

from typing import Any

import re

import orjson

from metnos.settings import i18n

ANSWERED = "answered"
UNVERIFIED = "unverified"


def unmatched(outcome: Any) -> list[str]:
    """The parts of an unverified answer found in nothing the steps returned."""
    parts = (outcome.failure or {}).get("unmatched") or []
    return [str(p) for p in parts]


def why(outcome: Any) -> str:
    """The one line that says how the turn ended, when it did not answer (the answer otherwise)."""
    failure = outcome.failure or {}
    if outcome.status == ANSWERED:
        return outcome.answer or outcome.status
    return str(failure.get("message") or outcome.status)


# The failure's message may open with the status's own word ("Unverified: ...", "Non verificata: ..."): said once.
_LEADING_STATUS = re.compile(r"^\s*(unverified|non verificat[ao])\s*[:,.\-–—]\s*", re.I)


def without_status(message: str) -> str:
    """``message`` without the status word it may open with, for a line that already says it."""
    return _LEADING_STATUS.sub("", message)


def quoted(parts: list[str]) -> str:
    # JSON strings: a part with a comma or a quote in it still reads as one part.
    return ", ".join(orjson.dumps(p).decode() for p in parts)


def unverified_lines(outcome: Any, language: str = i18n.SOURCE) -> list[str]:
    """An unverified outcome in lines: what is wrong with it first, the unchecked text last; the fixed
    words in ``language`` (the request's) where the catalogue has them."""
    said = i18n.in_force()
    lines = [said.text("telling.unverified", language, reason=without_status(why(outcome)))]
    parts = unmatched(outcome)
    if parts:
        lines.append(said.text("telling.not_found", language, parts=quoted(parts)))
    lines.append(said.text("telling.unchecked", language))
    lines.append(outcome.answer or "")
    return lines


def withheld_told(status: str, withheld: list[str]) -> list[str]:
    """Of the side effects a turn was not offered as a request that changes nothing, those it tells of: all
    of them when it did not answer, none when it did (the answer needed none of them)."""
    return [] if status == ANSWERED else list(withheld)


def notices(outcome: Any, language: str = i18n.SOURCE) -> list[str]:
    """One sentence for each quarantined executor the request would have been offered, then, when the turn did
    not answer, one for the side effects it was not offered as a request that changes nothing; in ``language``."""
    told = [i18n.said_words(q["notice"], language) for q in getattr(outcome, "quarantined", None) or []]
    withheld = getattr(outcome, "withheld_changes", None) or []
    if withheld and withheld_told(outcome.status, withheld):
        told.append(i18n.in_force().text("telling.withheld_change", language, executors=", ".join(withheld)))
    return told


def outcome_json(outcome: Any) -> dict[str, Any]:
    """The fields every JSON way in gives (``metnos ask --json``, the daemon's ``/api/ask``)."""
    return {
        "turn_id": outcome.turn_id, "status": outcome.status, "answer": outcome.answer,
        "failure": outcome.failure, "steps": outcome.steps, "message": why(outcome),
        "quarantined": list(getattr(outcome, "quarantined", None) or []),
        "withheld_changes": list(getattr(outcome, "withheld_changes", None) or []),
    }


def reply_text(outcome: Any, language: str = i18n.SOURCE) -> str:
    """The outcome as one message (a chat reply): the answer, or why there is none, then the notices."""
    if outcome.status == ANSWERED and outcome.answer:
        body = outcome.answer
    elif outcome.status == UNVERIFIED:
        first, *rest = unverified_lines(outcome, language)
        body = "\n".join([f"metnos: {first}", *rest[:-2], "", *rest[-2:]])
    else:
        body = f"metnos: {why(outcome)}"
    told = notices(outcome, language)
    return "\n\n".join([body, *(f"metnos: {n}" for n in told)])
