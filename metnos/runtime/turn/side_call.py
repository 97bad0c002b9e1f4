"""One model call beside the proposer's conversation: a role of its own
(the judge, the intent extractor, a filler, the scratchpad summariser),
its own tier, its own short context.

Recorded like every model call: ``LLMAsked`` with the role, the tier and
the messages as sent (``sent``, what ``turns show`` prints), then
``LLMReplied`` or ``LLMFailed``. Replay feeds the recorded reply back
through the same port, so a side call is as exact in replay as the
proposer's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from domain.turn import Turn
from domain.canonical import canonical_hash
from metnos.mechanisms.llm.errors import LLMError
from metnos.mechanisms.llm.messages import LLMReply, Message, SystemMessage, ToolSpec, UserMessage

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

AskModel = Callable[[str, Sequence[Message], Sequence[ToolSpec]], LLMReply]
Record = Callable[..., None]


def sent_form(messages: Sequence[Message]) -> list[dict[str, str]]:
    """The system and user messages as recorded on ``LLMAsked.sent``."""
    return [{"role": "system" if isinstance(m, SystemMessage) else "user", "text": m.text}
            for m in messages if isinstance(m, (SystemMessage, UserMessage))]


def ask_side(record: Record, ask_model: AskModel, *, round: int, role: str, tier: str,  # noqa: A002
             system: str, user: str) -> LLMReply | LLMError:
    """Ask ``tier`` with one system and one user message; the reply, or the
    error that stopped it (recorded either way, never raised)."""
    messages = [SystemMessage(system), UserMessage(user)]
    sent = sent_form(messages)
    record(Turn.LLMAsked, round=round, tier=tier, request_digest=canonical_hash({"messages": sent, "tools": []}),
           tools=[], role=role, sent=sent)
    started = time.perf_counter()
    try:
        reply = ask_model(tier, messages, [])
    except LLMError as e:
        record(Turn.LLMFailed, round=round, error_type=e.kind, message=str(e))
        return e
    record(Turn.LLMReplied, round=round, reply=reply.to_record(), intent_ms=int((time.perf_counter() - started) * 1000))
    return reply


def reply_object(text: str) -> tuple[Any, str | None]:
    """The JSON object a model's reply holds (from its first ``{`` to its last
    ``}``, fences and words around it ignored), or None and why not."""
    found = _OBJECT.search(text or "")
    if found is None:
        return None, "the reply holds no JSON object"
    try:
        return orjson.loads(found.group(0)), None
    except orjson.JSONDecodeError as e:
        return None, f"the reply's JSON does not parse: {e}"
