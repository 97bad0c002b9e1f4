"""What a channel turned away: a message from someone it does not serve.

A Telegram chat that is not in ``[telegram] allowed_chats`` gets no turn
and no answer, but the attempt is audited: one aggregate a message, one
event. The text itself is not kept (it came from a stranger); its length
and digest are, so the same message can be recognised again.
"""

from __future__ import annotations

from typing import Any

from domain.base import Created, MetnosAggregate


class ChannelMessage(MetnosAggregate):
    class MessageIgnored(Created):
        channel: str
        chat_id: str
        sender: str
        reason: str
        text_size: int
        text_digest: str

    def __init__(self, channel: str, chat_id: str, sender: str, reason: str, text_size: int, text_digest: str) -> None:
        self.channel = channel
        self.chat_id = chat_id
        self.sender = sender
        self.reason = reason
        self.text_size = text_size
        self.text_digest = text_digest

    @classmethod
    def ignored(cls, *, id: Any, at: Any, **fields: Any) -> ChannelMessage:  # noqa: A002
        return cls._create(cls.MessageIgnored, id=id, timestamp=at, **fields)
