"""The delivery outbox, folded: what waits to be sent, and what was given up.

The delivery worker (metnos/services/delivery.py) starts from this fold: a
message queued or failed before a restart is still here, and is sent after
it. A message sent leaves the state (only a count stays: its text is in the
log); a message given up stays, with its cause, so that ``turns show`` and
the dashboard can say which answer never arrived.

It is folded when asked (:func:`folded`, the outbox's four topics alone are
read from the log) and kept up to date in memory by the worker, not stored
as a view: the outbox is small and read by few, and the views a workspace
keeps (and the rebuild's output) stay as they were.
"""

from __future__ import annotations

from typing import Any

from domain.delivery import FAILED, GIVEN_UP, QUEUED, OutgoingMessage
from metnos.mechanisms.store.event_record import Record
from projections.base import Fold, Handler


class DeliveriesFold(Fold):
    name = "deliveries"
    version = 1

    def initial(self) -> dict[str, Any]:
        return {"messages": {}, "sent": 0, "dismissed": 0}

    def handlers(self) -> dict[type, Handler]:
        return {
            OutgoingMessage.MessageQueued: _queued,
            OutgoingMessage.MessageSent: _sent,
            OutgoingMessage.MessageFailed: _failed,
            OutgoingMessage.MessageGivenUp: _given_up,
            OutgoingMessage.MessageRetried: _retried,
            OutgoingMessage.MessageDismissed: _dismissed,
        }


def _queued(state: dict[str, Any], e: Record, position: int) -> None:
    key = e["originator_id"]
    state["messages"][key] = {
        "id": key, "channel": e["channel"], "address": e["address"], "text": e["text"], "kind": e["kind"],
        "turn_id": e["turn_id"], "reply_to": e["reply_to"], "queued_at": e["timestamp"],
        "status": "queued", "attempts": 0, "cause": None, "next_attempt_at": None, "version": e["originator_version"],
    }


def _sent(state: dict[str, Any], e: Record, position: int) -> None:
    if state["messages"].pop(e["originator_id"], None) is not None:
        state["sent"] += 1


def _failed(state: dict[str, Any], e: Record, position: int) -> None:
    m = state["messages"].get(e["originator_id"])
    if m is not None:
        m.update(status=FAILED, attempts=e["attempt"], cause=e["cause"], next_attempt_at=e["next_attempt_at"],
                 version=e["originator_version"])


def _given_up(state: dict[str, Any], e: Record, position: int) -> None:
    m = state["messages"].get(e["originator_id"])
    if m is not None:
        m.update(status=GIVEN_UP, attempts=e["attempt"], cause=e["cause"], next_attempt_at=None,
                 given_up_at=e["timestamp"], version=e["originator_version"])


def _retried(state: dict[str, Any], e: Record, position: int) -> None:
    m = state["messages"].get(e["originator_id"])
    if m is not None:
        m.update(status=QUEUED, attempts=0, cause=None, next_attempt_at=None, retried_by=e["by"], version=e["originator_version"])


def _dismissed(state: dict[str, Any], e: Record, position: int) -> None:
    # Let go: out of the outbox, as a message sent is (its text and who dismissed it stay in the log).
    if state["messages"].pop(e["originator_id"], None) is not None:
        state["dismissed"] = state.get("dismissed", 0) + 1


def folded(log: Any) -> dict[str, Any]:
    """The outbox's state from the whole log, reading only its own events."""
    return folded_on(log, DeliveriesFold().initial(), 1)[0]


def folded_on(log: Any, state: dict[str, Any], start: int) -> tuple[dict[str, Any], int]:
    """``state`` with the outbox's events from notification ``start`` on folded in; and where to go on from
    (so that a daemon sees what another one on the same log queued, sent or gave up since it last looked)."""
    fold = DeliveriesFold()
    # Read the head first: what is written meanwhile is read next time, and a scan never starts over.
    head = log.recorder.max_notification_id() or 0
    after = max(start, head + 1)
    for batch in log.record_batches(start, fields=fold.fields):
        for position, topic, record in batch:
            fold.apply_record(state, topic, record, position)
            after = max(after, position + 1)
    return state, after


def undelivered(state: dict[str, Any], turn_id: str | None = None) -> list[dict[str, Any]]:
    """The messages given up on, oldest first (those of one turn, if given)."""
    found = [m for m in state["messages"].values() if m["status"] == GIVEN_UP and (turn_id is None or m["turn_id"] == turn_id)]
    return sorted(found, key=lambda m: m["queued_at"])
