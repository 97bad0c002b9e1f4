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
``MessageSent`` is written. What was given up is read from the log each time
it is asked (only the outbox's events written since the last look), so that
a restart, or a second daemon on the same log, lists and answers the same.

Two kinds of sender: a channel's own (Telegram's bot, which threads and
formats its answers) and the executor's (:mod:`metnos.services.outgoing`,
send_messages run again for one message), which sends what a turn's
send_messages step could not, and a channel's messages when no channel of
this process sends them (the scheduler's, to mail or to a Telegram the
daemon does not poll).

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
# The kind of a message a turn's send_messages step sent: it is always sent again through the executor, as the step sent it.
MESSAGE = "message"
# A message's option saying it goes through send_messages whoever else serves its channel (a scheduled one to a name).
VIA_EXECUTOR = "send_messages"
# The channels whose messages leave the machine (send_messages' "outbox" channel is a local folder).
LEAVING = ("telegram", "mail")
LOCAL = "outbox"
# Where the jobs that tell the user reach the host's chat besides the outbox folder (seeds/002 ch. 11.2).
TOLD_ON = "telegram"
# The kinds of a channel's prompts (an approval's buttons, a question, an item of the inbox): worth nothing once
# their item is closed (a restart closes them all).
PROMPTS = ("approval", "question", "inbox")


class DeliveryFailed(MetnosError):
    """A channel could not deliver a message; the text is the cause, fit for the log (no secret in it).
    ``final``: no later attempt can mend it (the message is given up at once)."""

    final = False


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
        # The executor's sender (send_messages again): for MESSAGE, and for any channel no sender serves here.
        self._by_executor: Sender | None = None
        # id -> the message, for every message queued or failed that the worker still has to send.
        self._waiting: dict[str, OutgoingMessage] = {}
        # The outbox folded (projections/deliveries.py): None until first needed.
        self._fold = deliveries.DeliveriesFold()
        self._state: dict[str, Any] | None = None
        # Where the next look at the log starts (the outbox's events after the last one folded).
        self._read_from = 1
        # Whether the waiting messages of the log were taken for this outbox's worker (at its first serve).
        self._claimed = False
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
        self._claim()
        with self._cond:
            self._senders[channel] = sender
            self._stop = False
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="metnos-delivery", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def serve_by_executor(self, sender: Sender) -> None:
        """Send through ``sender`` (send_messages) what a turn's step sent, and the messages of channels no
        channel of this process sends; those queued before a restart first."""
        self._claim()
        with self._cond:
            self._by_executor = sender
            self._stop = False
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="metnos-delivery", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def sender_for(self, message: OutgoingMessage) -> Sender | None:
        """Who sends ``message`` here: the executor for a step's message (and one queued to go through it), else
        its channel's own sender (an answer's chat id means nothing to send_messages' recipients)."""
        if message.kind == MESSAGE or (message.options or {}).get("via") == VIA_EXECUTOR:
            return self._by_executor
        return self._senders.get(message.channel)

    def withdraw(self, channel: str, *, flush_s: float = 0.0) -> None:
        """Stop sending ``channel``'s messages, after up to ``flush_s`` seconds for those due now; what is
        left stays queued in the log for the next start. The worker ends with its last channel."""
        if flush_s > 0:
            self.flush(channel, flush_s)
        with self._cond:
            self._senders.pop(channel, None)
            thread = self._thread if not self._senders and self._by_executor is None else None
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
        """Whether a channel's messages can go out from this outbox now (its own sender, or the executor's)."""
        with self._cond:
            return channel in self._senders or self._by_executor is not None

    def serves_itself(self, channel: str) -> bool:
        """Whether a channel of this process sends ``channel``'s messages itself (its bot), not the executor."""
        with self._cond:
            return channel in self._senders

    def serves_by_executor(self) -> bool:
        with self._cond:
            return self._by_executor is not None

    def close(self) -> None:
        with self._cond:
            self._by_executor = None
        for channel in list(self._senders):
            self.withdraw(channel)
        with self._cond:
            thread, self._thread = self._thread, None
            self._stop = True
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout=1.0)

    # Messages ------------------------------------------------------------------------
    def queue(self, *, channel: str, address: str, text: str, kind: str, turn_id: str = "", reply_to: str = "",
              options: dict[str, Any] | None = None, held: bool = False) -> str:
        """Record a message for ``channel`` and wake the worker; returns the message's id. ``options``: what the
        sender needs besides the text (a mail's subject, a prompt's buttons). ``held``: its first attempt is the
        caller's (a turn's step), whose outcome :meth:`attempted` records; the worker leaves it alone until then."""
        rt = self.host.runtime
        message = OutgoingMessage.queued(id=rt.ids(), at=rt.clock(), channel=channel, address=address, text=text,
                                         kind=kind, turn_id=turn_id, reply_to=reply_to, options=dict(options or {}))
        self._record(message)
        if not held:
            with self._cond:
                self._waiting[str(message.id)] = message
                self._cond.notify_all()
        return str(message.id)

    def attempted(self, message_id: str, *, receipt: str | None = None, cause: str = "", final: bool = False) -> str:
        """The outcome of a held message's first attempt, made by its caller: sent (``receipt``), failed (retried
        by the worker with backoff) or, with ``final``, given up at once (a cause no retry mends: shown in the
        inbox, where it can be retried once mended). Returns the message's status."""
        message = self.host.runtime.log.repository.get(UUID(message_id))
        rt = self.host.runtime
        if receipt is not None:
            message.sent(attempt=1, receipt=receipt, at=rt.clock())
            self._record(message)
            return message.status
        rule = RetryRule(first_delay_s=self.rule.first_delay_s, max_delay_s=self.rule.max_delay_s, max_attempts=1) if final else self.rule
        given_up = message.failed(attempt=1, cause=cause, rule=rule, at=rt.clock())
        self._record(message)
        if given_up:
            self._log(f"could not send the {message.kind} to {message.channel} {message.address}: {cause}; it waits in the inbox")
        else:
            with self._cond:
                self._waiting[message_id] = message
                self._cond.notify_all()
        return message.status

    def drop(self, message_id: str, *, by: str) -> bool:
        """Let a message not sent yet go (a prompt whose approval or question closed before it went out); False
        when it is being sent or was sent already."""
        with self._cond:
            message = self._waiting.get(message_id)
            if message is None or self._sending == message_id:
                return False
            del self._waiting[message_id]
        message.dismiss(by=by, at=self.host.runtime.clock())
        self._record(message)
        return True

    def undelivered(self, turn_id: str | None = None) -> list[dict[str, Any]]:
        """The messages given up on (a turn's, if given), oldest first."""
        return deliveries.undelivered(self._refreshed(), turn_id)

    def waiting(self, turn_id: str) -> list[dict[str, Any]]:
        """A turn's messages not sent yet (queued, or failed and to be tried again), oldest first."""
        found = [m for m in self._refreshed()["messages"].values() if m["turn_id"] == turn_id and m["status"] in WAITING]
        return sorted(found, key=lambda m: m["queued_at"])

    def knows(self, message_id: str) -> bool:
        """Whether ``message_id`` is a message of the outbox (waiting, given up, or answered since)."""
        state = self._refreshed()
        with self._cond:
            return message_id in state.get("messages", {}) or message_id in self._answered_by

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
        self.host.runtime.log.save_now(*message.collect_events())

    def _refreshed(self) -> dict[str, Any]:
        """The outbox folded up to now: the events written since the last look (by this daemon or another) read in."""
        self._load()
        with self._load_lock:
            state, self._read_from = deliveries.folded_on(self.host.runtime.log, self._state, self._read_from)
            return state

    def _load(self) -> None:
        """Fold the outbox from the log once (what is written after is read in by :meth:`_refreshed`)."""
        with self._load_lock:
            if self._state is None:
                self._state, self._read_from = deliveries.folded_on(self.host.runtime.log, self._fold.initial(), 1)

    def _claim(self) -> None:
        """Once, as this outbox starts sending: the messages the log holds as waiting (queued or failed before this
        start) become its worker's. Only a sending outbox claims: one that only records (a command's) leaves them
        to the daemon's."""
        self._refreshed()
        rt = self.host.runtime
        with self._load_lock:
            if self._claimed:
                return
            self._claimed = True
            found = {key: rt.log.repository.get(UUID(key)) for key, m in self._state["messages"].items() if m["status"] in WAITING}
            # A prompt queued before a restart asks for an answer its broker no longer waits for: let go, said.
            stale = {key: m for key, m in found.items() if m.kind in PROMPTS}
            for key, message in stale.items():
                del found[key]
                message.dismiss(by="outbox:closed-at-restart", at=rt.clock())
                self._record(message)
            with self._cond:
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
                sender = self.sender_for(message)
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
            if self.sender_for(message) is None:
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
            # A cause no retry mends (no chat id, no token) gives up now: the inbox shows it, to retry once mended.
            rule = self.rule if not getattr(e, "final", False) else RetryRule(
                first_delay_s=self.rule.first_delay_s, max_delay_s=self.rule.max_delay_s, max_attempts=attempt)
            given_up = message.failed(attempt=attempt, cause=cause, rule=rule, at=rt.clock())
            self._record(message)
            if given_up:
                self._forget(message)
                self._log(f"gave up on the {message.kind} to {message.channel} {message.address} after {attempt} attempt(s): {cause}")
                if message.kind in PROMPTS:
                    # A prompt tells of an item that waits in the inbox on every other way in: listing the prompt
                    # there too would only be one more item telling of the same, so it is let go, said in the log.
                    message.dismiss(by="outbox:prompt-given-up", at=rt.clock())
                    self._record(message)
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


def scheduled_delivery(host: Any, addresses: Callable[[str, str], str | None],
                       recipient: Callable[[], str] | None = None,
                       told: Callable[[str], str | None] | None = None) -> Callable[[str, str, str], dict[str, Any] | None]:
    """The scheduler's port (metnos/runtime/scheduler/tick.py, ``Deliver``): a firing's message to a channel that
    leaves the machine (Telegram, mail) is queued in ``host``'s outbox: to the chat ``addresses(channel, schedule)``
    finds when a channel of the host sends it, else to ``recipient()`` through send_messages (the daemon's
    executor sender). None (the scheduler then runs send_messages itself) for the local outbox folder, or
    when nothing in this process sends that channel. ``told(schedule)``: the host's chat for a job that tells
    the user (the nightly jobs of seeds/002 ch. 11.2 whose channel is the outbox), or None: its message is
    queued to that chat on Telegram as well, the outbox folder keeping it as the record."""

    def deliver(schedule_id: str, channel: str, body: str) -> dict[str, Any] | None:
        outbox = host.outbox
        if channel == LOCAL and told is not None and outbox.serves_itself(TOLD_ON):
            chat = told(schedule_id)
            if chat is not None:
                outbox.queue(channel=TOLD_ON, address=chat, text=body, kind=SCHEDULED, options={"schedule_id": schedule_id})
            return None
        if channel not in LEAVING or not outbox.serves(channel):
            return None
        address = addresses(channel, schedule_id) if outbox.serves_itself(channel) else None
        options: dict[str, Any] = {}
        if address is None:
            if recipient is None or not outbox.serves_by_executor():
                return None
            address, options = recipient(), {"via": VIA_EXECUTOR}
        message_id = outbox.queue(channel=channel, address=address, text=body, kind=SCHEDULED, options=options)
        # Queued, not yet sent: the outbox's own events say when it was (MessageSent), or given up.
        return {"channel": channel, "ok": True, "kind": "queued", "message_id": message_id, "invocation_id": None}

    return deliver
