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

import time
from collections.abc import Callable, Sequence

from domain.canonical import canonical_hash
from domain.turn import Turn
from metnos.mechanisms.llm.constraint import JsonConstraint
from metnos.mechanisms.llm.errors import LLMError
from metnos.mechanisms.llm.messages import (
    LLMReply,
    Message,
    SystemMessage,
    ToolSpec,
    UserMessage,
)
from metnos.mechanisms.llm.reply_json import reply_object

AskModel = Callable[[str, Sequence[Message], Sequence[ToolSpec]], LLMReply]
Record = Callable[..., None]


def sent_form(messages: Sequence[Message]) -> list[dict[str, str]]:
    """The system and user messages as recorded on ``LLMAsked.sent``."""
    return [{"role": "system" if isinstance(m, SystemMessage) else "user", "text": m.text}
            for m in messages if isinstance(m, (SystemMessage, UserMessage))]


def ask_side(record: Record, ask_model: AskModel, *, round: int, role: str, tier: str,  # noqa: A002
             system: str, user: str, constraint: JsonConstraint | None = None) -> LLMReply | LLMError:
    """Ask ``tier`` with one system and one user message; the reply, or the
    error that stopped it (recorded either way, never raised). With a
    ``constraint``, a server that takes grammars holds the reply to it."""
    messages = [SystemMessage(system), UserMessage(user)]
    sent = sent_form(messages)
    record(Turn.LLMAsked, round=round, tier=tier, request_digest=canonical_hash({"messages": sent, "tools": []}),
           tools=[], role=role, sent=sent)
    started = time.perf_counter()
    try:
        reply = ask_model(tier, messages, []) if constraint is None else ask_model(tier, messages, [], constraint=constraint)
    except LLMError as e:
        record(Turn.LLMFailed, round=round, error_type=e.kind, message=str(e))
        return e
    record(Turn.LLMReplied, round=round, reply=reply.to_record(), intent_ms=int((time.perf_counter() - started) * 1000))
    return reply


class _SideModel:
    """A tier's model as a service asks it (``complete(messages)``), each call a side call of the turn."""

    def __init__(self, record: Record, ask_model: AskModel, *, round: int, role: str, tier: str) -> None:  # noqa: A002
        self._record, self._ask, self._round, self._role, self._tier = record, ask_model, round, role, tier

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), **_limits: object) -> LLMReply:
        # The tier's own token budget holds: a side call is sent as the turn's other calls are.
        system, user = (next((m.text for m in messages if isinstance(m, kind)), "") for kind in (SystemMessage, UserMessage))
        reply = ask_side(self._record, self._ask, round=self._round, role=self._role, tier=self._tier, system=system, user=user)
        if isinstance(reply, LLMError):
            raise reply
        return reply


def side_models(record: Record, ask_model: AskModel, *, round: int, role: str) -> Callable[[str], _SideModel]:  # noqa: A002
    """The models a service beside the turn asks (a schedule's words read by the model), as ``models(tier)``:
    each call recorded on the turn like its other side calls, so a replay feeds the reply back."""
    return lambda tier: _SideModel(record, ask_model, round=round, role=role, tier=tier)


# Re-exported: the side calls take their answers out of a reply with it.
__all__ = ["AskModel", "Record", "ask_side", "reply_object", "sent_form", "side_models"]
