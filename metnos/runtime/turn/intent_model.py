"""The intent extractor on the middle tier (seeds/002 ch. 4), beside the rules.

With ``[runtime] intent = "model"`` the turn asks the middle tier, before the
shortlist, which of the catalogue's executors the request needs: a short
context of its own (the executors' names and summaries, the request), a JSON
list back. The names it gives that the catalogue holds join the shortlist
(``via: "intent"``); the rules of metnos.runtime.turn.shortlist still apply after
it, so an executor with side effects the request does not name is withheld
whatever the model says. A reply that cannot be read, or a model that cannot
be reached, adds nothing: the rules' shortlist stands, and the event says why.

The call is a side call (metnos/runtime/turn/side_call.py) and its outcome an
``IntentExtracted`` event, so replay feeds the reply back and ranks alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metnos.mechanisms.llm.constraint import JsonConstraint
from metnos.mechanisms.llm.errors import LLMError
from metnos.runtime.turn.side_call import AskModel, Record, ask_side, reply_object
from metnos.settings import i18n

INTENT_PROMPT = i18n.texts().text("prompt.intent")  # the English catalogue, byte for byte
MAX_TOOLS = 4


@dataclass(frozen=True)
class ExtractedIntent:
    tools: tuple[str, ...]
    problem: str | None = None
    model: str = ""


def read_tools(text: str, known: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
    """The known names in the reply, in its order, each once; and what was wrong with it, if anything."""
    data, problem = reply_object(text)
    if problem is not None:
        return (), problem
    names = data.get("tools") if isinstance(data, dict) else None
    if not isinstance(names, list):
        return (), 'the reply has no "tools" list'
    wanted = [n for n in names if isinstance(n, str)]
    kept = tuple(dict.fromkeys(n for n in wanted if n in known))[:MAX_TOOLS]
    unknown = sorted({n for n in wanted if n not in known})
    return kept, (f"not in the catalogue: {', '.join(unknown)}" if unknown else None)


def intent_constraint(names: Sequence[str]) -> JsonConstraint:
    """The reply the prompt asks for, as a grammar: {"tools": [...]} of listed names, at most MAX_TOOLS."""
    return JsonConstraint({"type": "object", "properties": {"tools": {"type": "array", "items": {"enum": list(names)}, "maxItems": MAX_TOOLS}},
                           "required": ["tools"], "additionalProperties": False})


def extract_intent(record: Record, ask_model: AskModel, *, tier: str, request_text: str,
                   executors: Sequence[tuple[str, str]], system_prompt: str = INTENT_PROMPT) -> ExtractedIntent:
    """Ask ``tier`` which of ``executors`` ((name, summary) pairs) the request needs."""
    listed = "\n".join(f"{name}: {summary}" for name, summary in executors)
    reply = ask_side(record, ask_model, round=0, role="intent", tier=tier, system=system_prompt + listed, user=request_text,
                     constraint=intent_constraint([name for name, _ in executors]))
    if isinstance(reply, LLMError):
        return ExtractedIntent((), f"the intent extractor could not be asked: {reply}")
    tools, problem = read_tools(reply.text, [name for name, _ in executors])
    return ExtractedIntent(tools, problem, reply.model)
