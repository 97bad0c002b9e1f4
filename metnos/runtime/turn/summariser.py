"""The scratchpad summariser on the fast tier (seeds/002 ch. 4 and 8).

A spilled observation reaches the proposer as its first and last 500
characters (metnos/runtime/step/scratchpad.py): enough to see its form, not what a
long text says in its middle. With ``[runtime] summarise_spills = true`` the
fast tier is asked, in a context of its own, for a gist of the spilled text
(at most ``MAX_GIST_CHARS``), and the short observation carries it as
``gist`` beside the preview. The whole stays in the scratchpad, readable with
``scratchpad_read``; the gist only saves the proposer a read.

The model sees at most ``MAX_INPUT_CHARS`` of the observation (its text, or
its JSON), and says so when it saw less. A failure adds no gist: the preview
stands alone, and the ``SpillSummarised`` event says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from metnos.mechanisms.llm.errors import LLMError
from metnos.runtime.turn.side_call import AskModel, Record, ask_side
from metnos.settings import i18n

SUMMARISER_PROMPT = i18n.texts().text("prompt.summariser")  # the English catalogue, byte for byte
MAX_INPUT_CHARS = 12_000
MAX_GIST_CHARS = 800


@dataclass(frozen=True)
class Gist:
    text: str | None
    problem: str | None = None
    model: str = ""


def spilled_text(observation: Mapping[str, Any]) -> str:
    content = observation.get("content")
    if isinstance(content, str):
        return content
    return orjson.dumps(observation, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode()


def summarise(record: Record, ask_model: AskModel, *, round: int, tier: str, request_text: str,  # noqa: A002
              observation: Mapping[str, Any], system_prompt: str = SUMMARISER_PROMPT) -> Gist:
    text = spilled_text(observation)
    shown = text[:MAX_INPUT_CHARS]
    cut = f"\n[the output goes on for {len(text) - len(shown)} more characters]" if len(shown) < len(text) else ""
    reply = ask_side(record, ask_model, round=round, role="summariser", tier=tier, system=system_prompt,
                     user=f"The user's request: {request_text}\nThe tool output:\n{shown}{cut}")
    if isinstance(reply, LLMError):
        return Gist(None, f"the summariser could not be asked: {reply}")
    gist = " ".join(reply.text.split())[:MAX_GIST_CHARS]
    if not gist:
        return Gist(None, "the summariser's reply is empty", reply.model)
    return Gist(gist, None, reply.model)
