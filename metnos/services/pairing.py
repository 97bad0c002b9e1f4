"""Pairing a chat in one step: a one-time code issued on the command line, sent from the chat.

``issue_code`` records a ``PairingCode.CodeIssued`` event (the code's digest
and its expiry, never the code) and returns the code; the first chat that
sends it before it expires is recorded as ``PairedChat.ChatPaired`` and is
served from then on as if it were in ``allowed_chats``. A code is good once:
a second chat sending it, or any chat after the expiry, is turned away like
any stranger. Every fact is in the log, so the allow-list a channel serves
is ``allowed_chats`` plus the chats its log paired.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta
from typing import Any

from eventsourcing.utils import get_topic

from domain.canonical import canonical_hash
from domain.channel import PairedChat, PairingCode

DEFAULT_TTL_S = 600.0
# Lower-case base32 is easy to type on a phone and has no 0/O or 1/l to confuse: 50 bits.
_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_CODE_LENGTH = 10
CODE_RE = re.compile(rf"^pair-[{_ALPHABET}]{{{_CODE_LENGTH}}}$")


def _digest(code: str) -> str:
    return canonical_hash(code)


def issue_code(rt: Any, *, channel: str, ttl_s: float = DEFAULT_TTL_S) -> tuple[str, datetime]:
    """A new one-time code for ``channel`` and when it expires; the log keeps its digest."""
    code = "pair-" + "".join(secrets.choice(_ALPHABET) for _ in range(_CODE_LENGTH))
    now = rt.clock()
    expires = now + timedelta(seconds=ttl_s)
    rt.log.save(PairingCode.issued(id=rt.ids(), at=now, channel=channel, code_digest=_digest(code),
                                   expires_at=expires.isoformat()))
    return code, expires


def paired_chats(rt: Any, *, channel: str) -> set[str]:
    """The chats the log paired on ``channel``."""
    topic = get_topic(PairedChat.ChatPaired)
    return {e.chat_id for _, e in rt.log.domain_events(1, topics=(topic,)) if e.channel == channel}


def on_record(rt: Any, *, channel: str) -> bool:
    """Whether the log holds a pairing code issued for ``channel`` (a chat may come to send it)."""
    topic = get_topic(PairingCode.CodeIssued)
    return any(e.channel == channel for _, e in rt.log.domain_events(1, topics=(topic,)))


def redeem(rt: Any, *, channel: str, chat_id: str, sender: str, text: str) -> bool:
    """Pair ``chat_id`` if ``text`` is a code issued for ``channel``, not expired and not used; else False."""
    code = text.strip()
    if not CODE_RE.match(code):
        return False
    digest = _digest(code)
    issued = used = False
    topics = (get_topic(PairingCode.CodeIssued), get_topic(PairedChat.ChatPaired))
    now = rt.clock()
    for _, event in rt.log.domain_events(1, topics=topics):
        if event.channel != channel or event.code_digest != digest:
            continue
        if isinstance(event, PairingCode.CodeIssued):
            issued = now < datetime.fromisoformat(event.expires_at)
        else:
            used = True
    if not issued or used:
        return False
    rt.log.save(PairedChat.paired(id=rt.ids(), at=now, channel=channel, chat_id=chat_id, sender=sender, code_digest=digest))
    return True
