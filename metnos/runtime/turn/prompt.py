"""The planner's system prompt: what the model must know to drive a turn.

The texts are the English catalogue's ``prompt.*`` (metnos/settings/i18n/en.json);
the model is told them in English whatever the request's language
(docs/languages.md says why), so a recorded turn's prompt keeps its bytes.
"""

from __future__ import annotations

from metnos.settings import i18n
from metnos.settings.i18n.detect import language_name

_said = i18n.texts()

# Nothing in it may vary from turn to turn (no time, no id, no user data):
# it is the start of every first prompt, which llama.cpp's prompt cache then
# reuses from one turn to the next. Its size counts against the 600 tokens
# of a first prompt (bench/first_prompt.py).
PLANNER_PROMPT = _said.text("prompt.planner")
PLACEHOLDER_CORRECTION = _said.text("prompt.placeholder_correction")
FINAL_ONLY = _said.text("prompt.final_only")
ANSWER_NOW = _said.text("prompt.answer_now")


def asked_in(request: str, language: str) -> str:
    """The request as the model reads it: a request not in English is followed by a line asking
    for the answer in its language (an English request is sent as it is, so its bytes stay)."""
    if language == i18n.SOURCE:
        return request
    return request + "\n\n" + _said.text("prompt.answer_in_language", language_name=language_name(language))


def answer_from_results(request: str) -> str:
    """What the model is told when the turn wants its answer now, from the results it has."""
    return _said.text("prompt.answer_from_results", request=request)


def act_reminder(actions: list[str]) -> str:
    """What the model is told when it answered a request that asks for an action
    before any action ran (once a turn)."""
    return _said.text("prompt.act_reminder", actions=" or ".join(actions))


def answer_correction(reason: str) -> str:
    """What the model is told when its reply was not an answer (once a turn)."""
    return _said.text("prompt.answer_correction", reason=reason)
