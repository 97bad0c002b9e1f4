"""What waits for a person, whichever way in it came from: the one inbox's shared machinery.

A turn that needs a person (an approval, a question) holds a :class:`Pending`
item in a :class:`PendingBroker` and blocks until someone answers it on any
way in (the dashboard, the HTTP API, Telegram, ``metnos inbox``), the time
runs out, or the client that asked goes away. The broker carries the item
across threads; the turn records the question and its answer as its own
events. Every broker keeps the same rules:

* the first answer counts; a second one is refused with
  :class:`AlreadyAnswered`, naming the way in whose answer counted
  ("already answered on telegram (telegram:button)");
* who answered is ``"<channel>:<how>"``: the way in that answered, not the
  one that asked;
* an answer to an item that never waited here, or that stopped waiting, is
  :class:`PendingUnknown`.

metnos/services/approvals.py (approvals) and metnos/services/dialogs.py
(questions) are the two brokers; metnos/services/inbox.py lists them beside
the outbox's undelivered messages and sends each answer to the one that holds
its item.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from uuid import uuid4

from domain.errors import MetnosError

# How often a waiting item looks whether its client went away.
GONE_POLL_S = 0.25
# How many answered items are remembered, so that a second answer, given after, is told where the first came from.
REMEMBERED_ANSWERS = 256


class PendingUnknown(MetnosError):
    """No item of the inbox with that id (answered already, timed out, or never asked)."""


class AlreadyAnswered(PendingUnknown):
    """The item was answered already, on this or another way in: the first answer counts."""


@dataclass
class Pending:
    """One item waiting for a person; the brokers' items add what they ask."""

    id: str
    # The way in whose turn asked ("telegram", "http", "cli").
    channel: str
    asked_at: float
    deadline: float
    # The turn's request, so that whoever answers, on whichever way in, sees what it is for.
    request: str = ""
    answered: threading.Event = field(default_factory=threading.Event)
    # Who answered, as "<channel>:<how>" ("telegram:button", "http:user"): the way in that answered.
    by: str = ""

    def seconds_left(self) -> int:
        return max(0, round(self.deadline - time.monotonic()))


def answered_on(by: str) -> str:
    """The channel of a ``"<channel>:<how>"``."""
    return by.partition(":")[0]


def by_of(channel: str, how: str) -> str:
    """``how`` on ``channel`` as ``"<channel>:<how>"``; a ``how`` that names its channel already is kept."""
    return how if ":" in how else f"{channel}:{how}"


P = TypeVar("P", bound=Pending)


class PendingBroker(Generic[P]):
    """Items of one kind waiting for a person; subclasses say what they ask and what an answer holds."""

    # The item's name in what is said ("approval", "question").
    what = "item"
    unknown: type[PendingUnknown] = PendingUnknown
    already: type[AlreadyAnswered] = AlreadyAnswered

    def __init__(self, *, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._pending: dict[str, P] = {}
        self._lock = threading.Lock()
        # Answered items by id -> who answered, the last REMEMBERED_ANSWERS of them.
        self._answered_by: dict[str, str] = {}

    # Asking ------------------------------------------------------------------------------
    def _hold(self, pending: P, present: Callable[[P], None] | None, gone: threading.Event | None) -> bool | None:
        """Hold ``pending`` until it is answered (True), its deadline passes (False) or ``gone`` is set (None);
        ``present`` shows it on the asking channel once it is listed."""
        with self._lock:
            self._pending[pending.id] = pending
        try:
            if present is not None:
                present(pending)
            return self._wait(pending, gone)
        finally:
            with self._lock:
                self._pending.pop(pending.id, None)

    def _wait(self, pending: P, gone: threading.Event | None = None) -> bool | None:
        while not pending.answered.wait(min(GONE_POLL_S, max(0.0, pending.deadline - time.monotonic()))):
            if gone is not None and gone.is_set():
                return None
            if time.monotonic() >= pending.deadline:
                return False
        return True

    # Answering ---------------------------------------------------------------------------
    def first_answer(self, item_id: str) -> str:
        """Who answered ``item_id`` (``"<channel>:<how>"``), if it was answered here and is remembered; else ""."""
        with self._lock:
            return self._first(item_id)

    def _first(self, item_id: str) -> str:
        pending = self._pending.get(item_id)
        return self._answered_by.get(item_id) or (pending.by if pending is not None and pending.answered.is_set() else "")

    def _already(self, item_id: str, by: str) -> AlreadyAnswered:
        return self.already(f"{self.what} {item_id!r} was already answered on {answered_on(by)} ({by})")

    def _unknown(self, item_id: str) -> PendingUnknown:
        return self.unknown(f"no pending {self.what} {item_id!r}: it was answered, timed out, or never asked")

    def waiting(self, item_id: str) -> P | None:
        """The item still waiting under ``item_id``, else None."""
        with self._lock:
            pending = self._pending.get(item_id)
            return pending if pending is not None and not pending.answered.is_set() else None

    def knows(self, item_id: str) -> bool:
        """Whether ``item_id`` waits here or was answered here (and is remembered)."""
        with self._lock:
            return item_id in self._pending or item_id in self._answered_by

    def _settle(self, item_id: str, by: str, apply: Callable[[P], None]) -> P:
        """Give the answer ``apply`` writes to the waiting item, as ``by``; the first answer counts."""
        with self._lock:
            first = self._first(item_id)
            if first:
                raise self._already(item_id, first)
            pending = self._pending.get(item_id)
            if pending is None:
                raise self._unknown(item_id)
            apply(pending)
            pending.by = by
            pending.answered.set()
            self._remember(item_id, by)
            return pending

    def _remember(self, item_id: str, by: str) -> None:
        self._answered_by[item_id] = by
        while len(self._answered_by) > REMEMBERED_ANSWERS:
            del self._answered_by[next(iter(self._answered_by))]

    def _close_all(self, apply: Callable[[P], None]) -> list[P]:
        """Close every item still waiting with the answer ``apply`` writes (the daemon stopping, a Stop)."""
        with self._lock:
            waiting = [p for p in self._pending.values() if not p.answered.is_set()]
            for pending in waiting:
                apply(pending)
                pending.answered.set()
        return waiting

    def _listed(self) -> list[P]:
        with self._lock:
            return sorted(self._pending.values(), key=lambda p: p.asked_at)


def make_item(cls: type[P], *, channel: str, timeout_s: float, request: str = "", **fields: Any) -> P:
    """A new item of ``cls`` asked now on ``channel``, waiting ``timeout_s`` at most."""
    now = time.monotonic()
    return cls(id=uuid4().hex, channel=channel, asked_at=now, deadline=now + timeout_s, request=request, **fields)
