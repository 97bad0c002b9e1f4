"""The delivery outbox: a message for a channel is queued, then sent, retried, or given up on.

An answer a channel could not deliver must not vanish with the Bot API's
error. Every outgoing message is an aggregate of its own: ``MessageQueued``
(what, to whom, for which turn), then each attempt is ``MessageSent`` or
``MessageFailed`` (the attempt, its cause, when the next one is due), and
after the bound ``MessageGivenUp``. A message given up waits in the user's
inbox until someone answers it, once, on any way in: ``MessageRetried``
queues it again for a fresh round of attempts, ``MessageDismissed`` lets it
go; both name who answered (``"<channel>:<how>"``). The rules below are pure: the delivery
worker (metnos/services/delivery.py) asks them when to try again and when
to stop; time comes in as an argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate

QUEUED, FAILED, SENT, GIVEN_UP, DISMISSED = "queued", "failed", "sent", "given_up", "dismissed"
# What still waits for a worker: a queued message and one whose last attempt failed.
WAITING = (QUEUED, FAILED)


@dataclass(frozen=True)
class RetryRule:
    """Exponential backoff with a ceiling, and a bound on the attempts."""

    first_delay_s: float = 2.0
    max_delay_s: float = 300.0
    max_attempts: int = 10

    def __post_init__(self) -> None:
        if self.first_delay_s <= 0 or self.max_delay_s < self.first_delay_s or self.max_attempts < 1:
            msg = f"a retry rule needs 0 < first_delay_s <= max_delay_s and max_attempts >= 1, not {self}"
            raise ValueError(msg)

    def delay_s(self, attempt: int) -> float:
        """How long to wait after failed attempt number ``attempt`` (1, 2, ...): doubled each time, up to the ceiling."""
        return min(self.first_delay_s * 2 ** max(attempt - 1, 0), self.max_delay_s)

    def next_attempt_at(self, attempt: int, failed_at: datetime) -> datetime | None:
        """When to try again after attempt ``attempt`` failed at ``failed_at``; None: the bound is reached, give up."""
        if attempt >= self.max_attempts:
            return None
        return failed_at + timedelta(seconds=self.delay_s(attempt))


class OutgoingMessage(MetnosAggregate):
    class MessageQueued(Created):
        channel: str
        # Where on the channel: a Telegram chat id.
        address: str
        text: str
        # answer (a turn's), notice (the daemon or a channel speaking), digest.
        kind: str
        # The turn whose answer this is; "" for a message of no turn.
        turn_id: str = ""
        # The channel's own message this one answers (Telegram threads the reply to it); "" for none.
        reply_to: str = ""
        # What the sender needs besides the text: a mail's subject, a prompt's buttons ([[label, data], ...]).
        options: dict | None = None

    class MessageSent(DomainEvent):
        attempt: int
        # What the channel gave back (Telegram's message id), for tracing.
        receipt: str = ""

        def apply(self, m: OutgoingMessage) -> None:
            m.status, m.attempts = SENT, self.attempt

    class MessageFailed(DomainEvent):
        attempt: int
        cause: str
        next_attempt_at: str  # ISO 8601

        def apply(self, m: OutgoingMessage) -> None:
            m.status, m.attempts, m.next_attempt_at = FAILED, self.attempt, self.next_attempt_at

    class MessageGivenUp(DomainEvent):
        attempt: int
        cause: str

        def apply(self, m: OutgoingMessage) -> None:
            m.status, m.attempts = GIVEN_UP, self.attempt

    class MessageRetried(DomainEvent):
        """A message given up, sent again on someone's word: a new round of attempts starts."""

        by: str

        def apply(self, m: OutgoingMessage) -> None:
            m.status, m.attempts, m.next_attempt_at, m.answered_by = QUEUED, 0, "", self.by

    class MessageDismissed(DomainEvent):
        """A message given up, let go on someone's word: it leaves the inbox, and is never sent."""

        by: str

        def apply(self, m: OutgoingMessage) -> None:
            m.status, m.answered_by = DISMISSED, self.by

    def __init__(self, channel: str, address: str, text: str, kind: str, turn_id: str = "", reply_to: str = "",
                 options: dict | None = None) -> None:
        self.options = dict(options or {})
        self.channel = channel
        self.address = address
        self.text = text
        self.kind = kind
        self.turn_id = turn_id
        self.reply_to = reply_to
        self.status = QUEUED
        self.attempts = 0
        self.next_attempt_at = ""
        # Who retried or dismissed it once it was given up ("" while nobody has).
        self.answered_by = ""

    def due_in_s(self, now: datetime) -> float | None:
        """Seconds until this message is due (0: now); None: nothing more will be tried."""
        if self.status not in WAITING:
            return None
        if self.status == QUEUED:
            return 0.0
        return max((datetime.fromisoformat(self.next_attempt_at) - now).total_seconds(), 0.0)

    @classmethod
    def queued(cls, *, id: Any, at: Any, **fields: Any) -> OutgoingMessage:  # noqa: A002
        return cls._create(cls.MessageQueued, id=id, timestamp=at, **fields)

    def sent(self, *, attempt: int, receipt: str, at: Any) -> None:
        self.trigger_event(self.MessageSent, attempt=attempt, receipt=receipt, timestamp=at)

    def retry(self, *, by: str, at: Any) -> None:
        """Queue a message given up again (the caller checked it is given up and unanswered)."""
        self.trigger_event(self.MessageRetried, by=by, timestamp=at)

    def dismiss(self, *, by: str, at: Any) -> None:
        self.trigger_event(self.MessageDismissed, by=by, timestamp=at)

    def failed(self, *, attempt: int, cause: str, rule: RetryRule, at: datetime) -> bool:
        """One failed attempt: recorded as failed with its next time, or as given up past the bound. True: given up."""
        retry_at = rule.next_attempt_at(attempt, at)
        if retry_at is None:
            self.trigger_event(self.MessageGivenUp, attempt=attempt, cause=cause, timestamp=at)
            return True
        self.trigger_event(self.MessageFailed, attempt=attempt, cause=cause, next_attempt_at=retry_at.isoformat(), timestamp=at)
        return False
