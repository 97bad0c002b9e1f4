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


class PairingCode(MetnosAggregate):
    """A one-time code that lets the chat that sends it in (``metnos telegram pair``).

    Only the code's digest is kept: the log shows that a code was issued and
    until when, never anything a reader of the log could send in.
    """

    class CodeIssued(Created):
        channel: str
        code_digest: str
        expires_at: str  # ISO 8601, UTC

    def __init__(self, channel: str, code_digest: str, expires_at: str) -> None:
        self.channel = channel
        self.code_digest = code_digest
        self.expires_at = expires_at

    @classmethod
    def issued(cls, *, id: Any, at: Any, **fields: Any) -> PairingCode:  # noqa: A002
        return cls._create(cls.CodeIssued, id=id, timestamp=at, **fields)


class PairedChat(MetnosAggregate):
    """A chat let in by a pairing code: from then on it is served as an allowed chat."""

    class ChatPaired(Created):
        channel: str
        chat_id: str
        sender: str
        code_digest: str

    def __init__(self, channel: str, chat_id: str, sender: str, code_digest: str) -> None:
        self.channel = channel
        self.chat_id = chat_id
        self.sender = sender
        self.code_digest = code_digest

    @classmethod
    def paired(cls, *, id: Any, at: Any, **fields: Any) -> PairedChat:  # noqa: A002
        return cls._create(cls.ChatPaired, id=id, timestamp=at, **fields)
