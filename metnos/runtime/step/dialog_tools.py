"""The planner's dialog tools and the question they ask (seeds/002: get_inputs, request_location_from_user).

An atomic dialog asks the user one question on the turn's channel and the turn
waits for the answer; nothing else runs meanwhile, and the answer comes back
with ``"provenance": "user answer"``. ``get_inputs`` is the free-text dialog
the remediation registry names for a call that lacks its target
(``needs_action_target``: a mutation target is never fabricated), and the
planner may call it itself when the request leaves out what it needs;
``request_location_from_user`` is the same dialog asking where the user is,
for a location-relative request when get_location has none (seeds/002 ch.
11.2.2). The turn loop runs them (metnos/runtime/turn/rules/dialog.py): they are
offered beside the recurring-task builtins but never reach the scheduler's
service.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metnos.runtime.step.schedule_tools import BuiltinTool
from metnos.settings import i18n

GET_INPUTS = "get_inputs"
REQUEST_LOCATION = "request_location_from_user"
USER_ANSWER = "user answer"
LOCATION_QUESTION = i18n.english("turn.question.location")

# What brings each dialog tool into a round's shortlist (the pre-filter's affinity tags).
DIALOG_AFFINITY: dict[str, tuple[str, ...]] = {
    GET_INPUTS: ("question", "input", "chiedimi", "domanda"),
    REQUEST_LOCATION: ("location", "near", "nearest", "nearby", "around", "local", "weather",
                       "posizione", "dove", "vicino", "vicina", "qui", "meteo"),
}


@dataclass(frozen=True)
class Question:
    """What a dialog asks: at which step, with which tool, on which channel; and, for a call that
    lacks its target, the call (``executor``) and the argument the answer fills (``argument``)."""

    step: int
    tool: str
    question: str
    channel: str
    executor: str = ""
    argument: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "tool": self.tool, "question": self.question, "channel": self.channel,
                "executor": self.executor, "argument": self.argument}


def _answered_by_the_loop(service: Any, args: dict[str, Any], approval: dict[str, Any] | None) -> dict[str, Any]:
    # The loop asks the user itself; a dialog tool reaching a builtin service is a defect, said as one.
    return {"ok": False, "error": {"kind": "NotAService", "message": "a dialog tool is asked by the turn loop, not run as a service"}}


_QUESTION = {"type": "string", "minLength": 3, "maxLength": 300}

DIALOG_TOOLS: dict[str, BuiltinTool] = {t.name: t for t in (
    BuiltinTool(GET_INPUTS,
                # Its words are few and rare in requests: a description word ranks a tool into a shortlist.
                "Ask the user a question for something the request leaves out, saying the verb and the object; "
                "never guess instead.",
                {"type": "object", "required": ["question"], "additionalProperties": False,
                 "properties": {"question": {**_QUESTION, "description": "the question, with the verb and the object"}}},
                _answered_by_the_loop, side_effects=False, idempotent=True),
    BuiltinTool(REQUEST_LOCATION,
                "Ask the user where they are, when no location is configured and the request depends on it "
                "(the nearest pharmacy, the weather here).",
                {"type": "object", "additionalProperties": False,
                 "properties": {"question": {**_QUESTION, "description": "the question; default: where are you?"}}},
                _answered_by_the_loop, side_effects=False, idempotent=True),
)}
