"""One inbox: everything that waits for the user, whichever way in it came from, answerable on every way in.

Three kinds of item wait for a person:

* ``approval``: a turn's step that needs a yes or a no (metnos/services/approvals.py);
* ``question``: a turn's question (get_inputs, where the user is), answered with words
  (metnos/services/dialogs.py);
* ``undelivered``: a message the outbox gave up on after its bound (metnos/services/delivery.py),
  to be retried or dismissed.

The dashboard, the HTTP API (``/api/inbox``), Telegram (``/inbox``) and ``metnos inbox`` list the
same items and answer them through :func:`answer`, which sends each answer to the one that holds
its item. The first answer counts; a second is :class:`~metnos.services.pending.AlreadyAnswered`
(409 on HTTP), naming the way in that gave the first. Each answer is an event naming its channel:
the turn's ``ApprovalAnswered`` or ``DialogAnswered`` (``by``), the outbox's ``MessageRetried`` or
``MessageDismissed`` (``by``).
"""

from __future__ import annotations

from typing import Any

from domain.errors import MetnosError
from metnos.services.delivery import DISMISS, RETRY
from metnos.services.pending import PendingUnknown

APPROVAL, QUESTION, UNDELIVERED = "approval", "question", "undelivered"
KINDS = (APPROVAL, QUESTION, UNDELIVERED)


class BadAnswer(MetnosError):
    """An answer that does not fit its item (words for an approval, a yes for a message)."""


def items(host: Any) -> list[dict[str, Any]]:
    """Every item waiting for the user, each with its ``kind`` and what answers it (``answers``)."""
    found: list[dict[str, Any]] = []
    for item in host.approvals.pending():
        found.append({"kind": APPROVAL, "answers": ["yes", "no"], **item})
    for item in host.dialogs.pending():
        found.append({"kind": QUESTION, "answers": ["text"], **item})
    for message in host.outbox.undelivered():
        found.append({"kind": UNDELIVERED, "answers": [RETRY, DISMISS], "id": message["id"], "channel": message["channel"],
                      "address": message["address"], "text": message["text"], "message_kind": message["kind"],
                      "turn_id": message["turn_id"], "attempts": message["attempts"], "cause": message["cause"],
                      "queued_at": message["queued_at"], "given_up_at": message.get("given_up_at")})
    return found


def kind_of(host: Any, item_id: str) -> str | None:
    """Which broker holds (or held) ``item_id``; None when none knows it."""
    if host.approvals.knows(item_id) or any(a["id"] == item_id for a in host.approvals.pending()):
        return APPROVAL
    if host.dialogs.knows(item_id):
        return QUESTION
    if host.outbox.knows(item_id):
        return UNDELIVERED
    return None


def answer(host: Any, item_id: str, *, channel: str, by: str, approve: bool | None = None, text: str | None = None,
           action: str | None = None) -> dict[str, Any]:
    """Answer the item ``item_id`` from ``channel`` (``by``: how there): ``approve`` for an approval, ``text`` for a
    question, ``action`` (retry, dismiss) for an undelivered message. The first answer counts."""
    kind = kind_of(host, item_id)
    if kind is None:
        raise PendingUnknown(f"nothing in the inbox has the id {item_id!r}: it was answered and forgotten, timed out, "
                             "or never asked; `metnos inbox` lists what waits")
    if kind == APPROVAL:
        if not isinstance(approve, bool):
            raise BadAnswer(f"{item_id} is an approval: answer it yes or no")
        return {"kind": kind, **host.approvals.answer(item_id, approved=approve, by=by, channel=channel)}
    if kind == QUESTION:
        if not isinstance(text, str):
            raise BadAnswer(f"{item_id} is a question: answer it with the words it asks for")
        done = host.dialogs.answer(item_id, text, by=by, channel=channel)
        return {"kind": kind, **done, "by": host.dialogs.first_answer(item_id)}
    if action not in (RETRY, DISMISS):
        raise BadAnswer(f"{item_id} is an undelivered message: answer it {RETRY} or {DISMISS}")
    return {"kind": kind, **host.outbox.answer(item_id, action, by=by, channel=channel)}
