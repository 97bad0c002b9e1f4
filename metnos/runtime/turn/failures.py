"""How a turn ends when it cannot answer, and the error observations of ch. 12.

seeds/002 ch. 12: never let the system fall; always return a structured
response. Two kinds of thing live here:

* :class:`TurnFailure`, a closed set of ways a turn *ends* without an
  answer, each with its ``final_kind`` (``error`` or the cap that was hit)
  and a one-line message for the user. ``ProviderError`` and the empty
  catalogue are the spec's cases; the caps come from ch. 10; an LLM reply
  that is neither text nor a usable tool call, a ``get_inputs`` dialog that
  stops the turn (``needs_action_target``), and an internal defect caught
  at the loop's edge complete the set so that every exit has a kind.
* Error *observations* for executor failures that do not end the turn
  (the LLM sees them at the next step and can correct): a crash
  (non-JSON output plus stderr), a non-JSON stdout, and a call to an
  executor that is not in the catalogue (the tampered one the loader
  rejected, a quarantined one, or an invented name).

Both are plain JSON through ``to_json``. Output excerpts are bounded so a
noisy executor cannot flood the history.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from metnos.settings import i18n
from metnos.settings.i18n.detect import language_of

EXCERPT_CHARS = 500


class FailureKind(enum.Enum):
    PROVIDER_UNREACHABLE = "provider_unreachable"
    EMPTY_CATALOGUE = "empty_catalogue"
    CAP_STEPS = "cap_steps"
    CAP_SAME_EXECUTOR = "cap_same_executor"
    BAD_LLM_REPLY = "bad_llm_reply"
    NEEDS_INPUTS = "needs_inputs"
    INTERNAL_ERROR = "internal_error"
    STEP_FAILED = "step_failed"
    STEP_REFUSED = "step_refused"
    UNUSABLE_ANSWER = "unusable_answer"
    INVALID_ARGUMENTS = "invalid_arguments"
    ACTION_NOT_TAKEN = "action_not_taken"
    UNVERIFIED_ANSWER = "unverified_answer"
    SAID_NOT_DONE = "said_not_done"


# How the turn ended, by kind: failed unless a fence or the user said no
# (refused) or the request lacks what acting needs (needs_input).
STATUS_OF: dict[FailureKind, str] = {
    FailureKind.STEP_REFUSED: "refused",
    FailureKind.NEEDS_INPUTS: "needs_input",
    FailureKind.UNVERIFIED_ANSWER: "unverified",
}

# kind -> final_kind; the message is the catalogue's ``failure.<kind>`` (metnos/settings/i18n/en.json).
_FINAL_KIND: dict[FailureKind, str] = {
    FailureKind.PROVIDER_UNREACHABLE: "error",
    FailureKind.EMPTY_CATALOGUE: "error",
    FailureKind.CAP_STEPS: "cap_steps",
    FailureKind.CAP_SAME_EXECUTOR: "cap_same_executor",
    FailureKind.BAD_LLM_REPLY: "error",
    FailureKind.NEEDS_INPUTS: "needs_inputs",
    FailureKind.INTERNAL_ERROR: "error",
    FailureKind.STEP_FAILED: "error",
    FailureKind.STEP_REFUSED: "refused",
    FailureKind.UNUSABLE_ANSWER: "error",
    FailureKind.INVALID_ARGUMENTS: "error",
    FailureKind.ACTION_NOT_TAKEN: "error",
    FailureKind.UNVERIFIED_ANSWER: "unverified",
    FailureKind.SAID_NOT_DONE: "error",
}


def _excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"


@dataclass(frozen=True, slots=True)
class TurnFailure:
    kind: FailureKind
    final_kind: str
    message: str
    detail: str
    # The message as ``TurnFailed`` records it: the detail in English whatever the language (recorded turns replay
    # against it); ``message`` says the detail in the request's language too, for the person.
    recorded: str = ""

    @property
    def status(self) -> str:
        return STATUS_OF.get(self.kind, "failed")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "final_kind": self.final_kind, "status": self.status,
                "message": self.message, "detail": self.detail}


def request_language(text: str) -> str:
    """The language of a request, among the catalogue's: its fixed texts are said in it."""
    return language_of(text, i18n.in_force().languages())


def language_of_turn(turn: Any) -> str:
    """The language the turn recorded for its request (metnos/settings/i18n/detect.py)."""
    return turn.language


def turn_failure(kind: FailureKind, detail: str = "", language: str = i18n.SOURCE) -> TurnFailure:
    """The outcome for ``kind``; ``detail`` fills the message (bounded, one line), said in ``language``
    when the catalogue has a fresh translation (metnos/settings/i18n), in English otherwise."""
    if not isinstance(kind, FailureKind):
        raise TypeError(f"not a FailureKind: {kind!r}")
    final_kind = _FINAL_KIND[kind]
    said = i18n.in_force()
    one_line = _one_line(str(detail)) or i18n.english("turn.no_detail")
    recorded = said.text(f"failure.{kind.value}", language, detail=one_line)
    told = _one_line(i18n.said_words(str(detail), language)) or said.text("turn.no_detail", language)
    return TurnFailure(kind, final_kind, said.text(f"failure.{kind.value}", language, detail=told), one_line, recorded)


def _one_line(text: str) -> str:
    return " ".join(_excerpt(text, 200).split())


def executor_crashed(stdout: str, stderr: str) -> dict[str, Any]:
    """The observation for an executor that died without a JSON answer."""
    return {"ok": False, "error_class": "executor_crashed",
            "error": f"non-JSON output: {_excerpt(stdout) or '(empty)'}; stderr: {_excerpt(stderr) or '(empty)'}"}


def non_json_output(stdout: str) -> dict[str, Any]:
    return {"ok": False, "error_class": "non_json_output",
            "error": "non-JSON output", "stdout_excerpt": _excerpt(stdout)}


def unknown_executor(name: str, available: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """The observation for a call to a name outside the turn's pool."""
    return {"ok": False, "error_class": "unknown_executor",
            "error": f"nonexistent executor: {name}",
            "available": sorted(available)}


# What went wrong in a step is said by ``turn.step.kind.<kind>`` (an invocation's failure) or
# ``turn.step.class.<error_class>`` (a step the loop refused), with ``.because`` when there is a cause to give.
_STEP_WORDS = "turn.step."


def step_failure_words(executor: str, observation: dict[str, Any]) -> str:
    """What went wrong in a step, in one line a person can read:
    ``get_now crashed: RuntimeError: boom`` rather than ``-> Crash``."""
    error = observation.get("error")
    known = i18n.texts().source
    if isinstance(error, dict) and error.get("kind"):
        key, what = f"{_STEP_WORDS}kind.{error['kind']}", str(error["kind"])
        cause = ": ".join(str(error[k]) for k in ("type", "message") if error.get(k) and error.get(k) != "Exited")
        if not cause:
            cause = str(error.get("detail") or error.get("rule") or "")
    else:
        error_class = str(observation.get("error_class") or "")
        key, what = f"{_STEP_WORDS}class.{error_class}", error_class
        if isinstance(error, dict):
            cause = str(error.get("message") or error.get("detail") or "")
        else:
            cause = str(error or "")
        if not cause and observation.get("errors"):
            first = observation["errors"][0]
            cause = f"{first.get('path') or '(top)'}: {first.get('message', '')}"
    cause = _one_line(cause)
    if key not in known:
        key = f"{_STEP_WORDS}failed_as" if what else f"{_STEP_WORDS}failed"
    return i18n.english(f"{key}.because" if cause else key, executor=executor, what=what, cause=cause)
