"""The delivery worker: it sends what the outbox holds, retries what failed, and survives a restart.

A channel hands its outgoing messages to :meth:`Outbox.queue` instead of
sending them itself: the message is a ``MessageQueued`` event at once (so a
channel that is down, or a daemon that stops, loses nothing), and the worker
thread sends it through the sender the channel registered with
:meth:`Outbox.serve`. Each attempt is an event (domain/delivery.py): sent,
failed with the time of the next try (exponential backoff with a ceiling),
or given up after the bound. At start the worker folds the outbox from
the log (projections/deliveries.py), so what was queued before a restart is
sent after it, once: a message is dropped from the worker as soon as its
``MessageSent`` is written. The fold is then kept in memory with every event
the worker writes, for the dashboard to ask what was given up.

The worker writes the log on its own thread without the host's writer lock
(the store serialises writers, and these events touch no turn), so a
delivery never waits for a turn to end.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from domain.delivery import GIVEN_UP, WAITING, OutgoingMessage, RetryRule
from domain.errors import MetnosError
from metnos.services.pending import AlreadyAnswered, PendingUnknown, answered_on, by_of
from projections import deliveries

# A sender sends one message on its channel and returns the channel's receipt (a message id), or raises.
Sender = Callable[[OutgoingMessage], str]
# The kind of a scheduled firing's message (its result, or why it failed).
SCHEDULED = "scheduled"
# How long the worker sleeps at most between looks, should a wake-up be missed.
IDLE_S = 5.0


class DeliveryFailed(MetnosError):
    """A channel could not deliver a message; the text is the cause, fit for the log (no secret in it)."""


class MessageUnknown(PendingUnknown):
    """No undelivered message with that id (never queued, or not given up)."""


class MessageAlreadyAnswered(AlreadyAnswered, MessageUnknown):
    """The undelivered message was retried or dismissed already, on this or another way in: the first answer counts."""


# What can be done with a message given up.
RETRY, DISMISS = "retry", "dismiss"


class Outbox:
    def __init__(self, host: Any, *, rule: RetryRule | None = None, log: Callable[[str], None] | None = None) -> None:
        self.host = host
        self.rule = rule or RetryRule()
        self._log = log or (lambda line: print(f"metnos: delivery: {line}", file=sys.stderr, flush=True))
        self._senders: dict[str, Sender] = {}
        # id -> the message, for every message queued or failed that the worker still has to send.
        self._waiting: dict[str, OutgoingMessage] = {}
        # The outbox folded (projections/deliveries.py): None until first needed.
        self._fold = deliveries.DeliveriesFold()
        self._state: dict[str, Any] | None = None
        self._load_lock = threading.Lock()
        # The one message being sent now, so that flush() knows the worker is busy with it.
        self._sending: str | None = None
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stop = False
        # One answer at a time to what was given up; who answered each, the last 256.
        self._answering = threading.Lock()
        self._answered_by: dict[str, str] = {}

    # Channels ------------------------------------------------------------------------
    def serve(self, channel: str, sender: Sender) -> None:
        """Send ``channel``'s messages through ``sender`` from now on, those queued before a restart first."""
        self._load()
        with self._cond:
            self._senders[channel] = sender
            self._stop = False
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="metnos-delivery", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def withdraw(self, channel: str, *, flush_s: float = 0.0) -> None:
        """Stop sending ``channel``'s messages, after up to ``flush_s`` seconds for those due now; what is
        left stays queued in the log for the next start. The worker ends with its last channel."""
        if flush_s > 0:
            self.flush(channel, flush_s)
        with self._cond:
            self._senders.pop(channel, None)
            thread = self._thread if not self._senders else None
            if thread is not None:
                self._stop = True
                self._thread = None
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout=1.0)

    def flush(self, channel: str, within_s: float) -> bool:
        """Wait until no message of ``channel`` is due now (those waiting for a retry are not waited for)."""
        deadline = time.monotonic() + within_s
        with self._cond:
            while True:
                now = self.host.runtime.clock()
                busy = self._sending is not None or any(
                    m.channel == channel and m.due_in_s(now) == 0 for m in self._waiting.values())
                left = deadline - time.monotonic()
                if not busy or left <= 0:
                    return not busy
                self._cond.wait(min(left, 0.1))

    def serves(self, channel: str) -> bool:
        """Whether a channel's sender is registered now (its messages go out from this outbox)."""
        with self._cond:
            return channel in self._senders

    def close(self) -> None:
        for channel in list(self._senders):
            self.withdraw(channel)

    # Messages ------------------------------------------------------------------------
    def queue(self, *, channel: str, address: str, text: str, kind: str, turn_id: str = "", reply_to: str = "") -> str:
        """Record a message for ``channel`` and wake the worker; returns the message's id."""
        rt = self.host.runtime
        message = OutgoingMessage.queued(id=rt.ids(), at=rt.clock(), channel=channel, address=address, text=text,
                                         kind=kind, turn_id=turn_id, reply_to=reply_to)
        self._record(message)
        with self._cond:
            self._waiting[str(message.id)] = message
            self._cond.notify_all()
        return str(message.id)

    def undelivered(self, turn_id: str | None = None) -> list[dict[str, Any]]:
        """The messages given up on (a turn's, if given), oldest first."""
        self._load()
        with self._cond:
            return deliveries.undelivered(self._state or self._fold.initial(), turn_id)

    def knows(self, message_id: str) -> bool:
        """Whether ``message_id`` is a message of the outbox (waiting, given up, or answered since)."""
        self._load()
        with self._cond:
            return message_id in (self._state or {}).get("messages", {}) or message_id in self._answered_by

    def answer(self, message_id: str, action: str, *, by: str, channel: str = "http") -> dict[str, Any]:
        """Retry (queue again, for a new round of attempts) or dismiss a message given up, as ``by`` on
        ``channel``; the first answer counts, a second is refused naming the way in that gave the first."""
        if action not in (RETRY, DISMISS):
            raise MessageUnknown(f"an undelivered message is answered with {RETRY!r} or {DISMISS!r}, not {action!r}")
        self._load()
        by = by_of(channel, by)
        rt = self.host.runtime
        with self._answering:
            message: OutgoingMessage | None = None
            first = self._answered_by.get(message_id)
            if not first:
                message = self._given_up(message_id)
                first = message.answered_by if message is not None and message.status != GIVEN_UP else ""
            if first:
                raise MessageAlreadyAnswered(f"undelivered message {message_id!r} was already answered on {answered_on(first)} ({first})")
            if message is None or message.status != GIVEN_UP:
                raise MessageUnknown(f"no undelivered message {message_id!r}: it was sent, is still being tried, or never queued")
            if action == RETRY:
                message.retry(by=by, at=rt.clock())
            else:
                message.dismiss(by=by, at=rt.clock())
            self._record(message)
            self._answered_by[message_id] = by
            while len(self._answered_by) > 256:
                del self._answered_by[next(iter(self._answered_by))]
        if action == RETRY:
            with self._cond:
                self._waiting[message_id] = message
                self._cond.notify_all()
            self._log(f"the {message.kind} to {message.channel} {message.address} is queued again ({by})")
        return {"id": message_id, "action": action, "by": by}

    def _given_up(self, message_id: str) -> OutgoingMessage | None:
        try:
            found = self.host.runtime.log.repository.get(UUID(message_id))
        except (ValueError, AggregateNotFoundError):
            return None
        return found if isinstance(found, OutgoingMessage) else None

    def _record(self, message: OutgoingMessage) -> None:
        """Write the message's new events (at once, also from inside a unit of work: a message must outlive
        whatever comes next) and fold them into the state kept in memory."""
        events = message.collect_events()
        self.host.runtime.log.save_now(*events)
        with self._cond:
            if self._state is not None:
                for event in events:
                    self._fold.apply(self._state, event, 0)

    def _load(self) -> None:
        """Fold the outbox from the log once; the messages it holds as waiting (queued or failed before this
        start) are the worker's."""
        with self._load_lock:
            if self._state is not None:
                return
            rt = self.host.runtime
            state = deliveries.folded(rt.log)
            found = {key: rt.log.repository.get(UUID(key)) for key, m in state["messages"].items() if m["status"] in WAITING}
            with self._cond:
                self._state = state
                for key, message in found.items():
                    self._waiting.setdefault(key, message)
        if found:
            self._log(f"{len(found)} message(s) queued before this start will be sent")

    # The worker ----------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                if self._stop:
                    return
                message, wait_s = self._next()
                if message is None:
                    self._cond.wait(wait_s)
                    continue
                sender = self._senders[message.channel]
                self._sending = str(message.id)
            try:
                self._attempt(message, sender)
            finally:
                with self._cond:
                    self._sending = None
                    self._cond.notify_all()

    def _next(self) -> tuple[OutgoingMessage | None, float]:
        """The message to try now (oldest first), else how long to sleep until one is due."""
        now = self.host.runtime.clock()
        wait_s = IDLE_S
        for message in self._waiting.values():
            if message.channel not in self._senders:
                continue
            due_in = message.due_in_s(now)
            if due_in == 0:
                return message, 0.0
            if due_in is not None:
                wait_s = min(wait_s, due_in)
        return None, wait_s

    def _attempt(self, message: OutgoingMessage, sender: Sender) -> None:
        rt = self.host.runtime
        attempt = message.attempts + 1
        try:
            receipt = sender(message)
        except Exception as e:  # noqa: BLE001 - every failure is recorded with its cause, and retried
            cause = str(e) if isinstance(e, DeliveryFailed) else f"{type(e).__name__}: {e}"
            given_up = message.failed(attempt=attempt, cause=cause, rule=self.rule, at=rt.clock())
            self._record(message)
            if given_up:
                self._forget(message)
                self._log(f"gave up on the {message.kind} to {message.channel} {message.address} after {attempt} attempt(s): {cause}")
            else:
                self._log(f"could not send the {message.kind} to {message.channel} {message.address} (attempt {attempt}): "
                          f"{cause}; next try at {message.next_attempt_at}")
            return
        message.sent(attempt=attempt, receipt=str(receipt or ""), at=rt.clock())
        self._record(message)
        self._forget(message)

    def _forget(self, message: OutgoingMessage) -> None:
        with self._cond:
            self._waiting.pop(str(message.id), None)


def scheduled_delivery(host: Any, addresses: Callable[[str, str], str | None]) -> Callable[[str, str, str], dict[str, Any] | None]:
    """The scheduler's port (metnos/runtime/scheduler/tick.py, ``Deliver``): a firing's message to ``channel`` is
    queued in ``host``'s outbox when a channel there sends it and ``addresses(channel, recipient)`` finds where;
    otherwise None, and the scheduler sends it through send_messages as before."""

    def deliver(schedule_id: str, channel: str, body: str) -> dict[str, Any] | None:
        outbox = host.outbox
        if not outbox.serves(channel):
            return None
        address = addresses(channel, schedule_id)
        if address is None:
            return None
        message_id = outbox.queue(channel=channel, address=address, text=body, kind=SCHEDULED)
        # Queued, not yet sent: the outbox's own events say when it was (MessageSent), or given up.
        return {"channel": channel, "ok": True, "kind": "queued", "message_id": message_id, "invocation_id": None}

    return deliver
