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

EXCERPT_CHARS = 500


class FailureKind(enum.Enum):
    PROVIDER_UNREACHABLE = "provider_unreachable"
    EMPTY_CATALOGUE = "empty_catalogue"
    CAP_STEPS = "cap_steps"
    CAP_SAME_EXECUTOR = "cap_same_executor"
    BAD_LLM_REPLY = "bad_llm_reply"
    NEEDS_INPUTS = "needs_inputs"
    INTERNAL_ERROR = "internal_error"


# kind -> (final_kind, message template)
_TABLE: dict[FailureKind, tuple[str, str]] = {
    FailureKind.PROVIDER_UNREACHABLE: (
        "error", "The language model is unreachable ({detail}); nothing was done."),
    FailureKind.EMPTY_CATALOGUE: ("error", "(empty catalog)"),
    FailureKind.CAP_STEPS: (
        "cap_steps", "Stopped after {detail} steps without reaching an answer."),
    FailureKind.CAP_SAME_EXECUTOR: (
        "cap_same_executor", "Stopped: {detail} was called too many times in this turn."),
    FailureKind.BAD_LLM_REPLY: (
        "error", "The language model gave a reply I could not use ({detail})."),
    FailureKind.NEEDS_INPUTS: (
        "needs_inputs", "I need more information before acting: {detail}"),
    FailureKind.INTERNAL_ERROR: (
        "error", "Something went wrong inside Metnos ({detail}); the turn was stopped."),
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

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "final_kind": self.final_kind,
                "message": self.message, "detail": self.detail}


def turn_failure(kind: FailureKind, detail: str = "") -> TurnFailure:
    """The outcome for ``kind``; ``detail`` fills the message (bounded, one line)."""
    if not isinstance(kind, FailureKind):
        raise TypeError(f"not a FailureKind: {kind!r}")
    final_kind, template = _TABLE[kind]
    one_line = " ".join(_excerpt(str(detail), 200).split()) or "no detail"
    return TurnFailure(kind, final_kind, template.format(detail=one_line), one_line)


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
