"""Questions a turn asks a person who answers elsewhere (the dashboard, the HTTP API): the atomic dialog.

A turn's asker blocks on :meth:`DialogBroker.ask` until someone answers
through :meth:`answer`, or the time runs out: then there is no answer and the
turn ends ``needs_input``, saying so (nothing is guessed in its place). The
question and its answer are recorded by the turn (``DialogAsked``,
``DialogAnswered``).

With a log (the daemon's), the question is also in the log as it is asked
(``DialogRequest``, domain/dialog_request.py), not in this process's memory
alone: every daemon on that log lists the open questions of the log beside its
own, an answer given through any of them is recorded there (the first one
counts), and the asking daemon looks for it while it waits. A question whose
wait ended (answered, timed out, stopped) is closed in the log, so that no
other way in shows it after.
"""

from __future__ import annotations

from collections.abc import Callable

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError
from eventsourcing.utils import get_topic

from domain.dialog_request import ANSWERED, DialogClosed, DialogRequest
from domain.due import parse, stamp
from domain.errors import MetnosError
from metnos.runtime.step.dialog_tools import Question
from metnos.services.pending import GONE_POLL_S, AlreadyAnswered, Pending, PendingBroker, PendingUnknown, by_of, make_item

# How often a daemon waiting on a question looks in the log for an answer given through another.
LOG_POLL_S = 0.25
_TOPICS = tuple(get_topic(e) for e in (DialogRequest.DialogRequested, DialogRequest.DialogRequestAnswered,
                                       DialogRequest.DialogRequestWithdrawn))


class DialogUnknown(PendingUnknown):
    """No pending question with that id (answered already, timed out, or never asked)."""


class DialogAlreadyAnswered(AlreadyAnswered, DialogUnknown):
    """The question was answered already, on this or another way in: the first answer counts."""


class EmptyAnswer(MetnosError):
    """An answer with no words in it."""


@dataclass
class PendingDialog(Pending):
    question: Question = field(default_factory=lambda: Question(step=0, tool="", question="", channel=""))
    answer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **self.question.to_json(), "request": self.request, "seconds_left": self.seconds_left()}


class DialogBroker(PendingBroker[PendingDialog]):
    what = "question"
    unknown = DialogUnknown
    already = DialogAlreadyAnswered

    def __init__(self, *, timeout_s: float, log: Any = None, clock: Callable[[], datetime] | None = None) -> None:
        """``log``: where questions and answers pass between daemons and outlive this one; ``clock`` stamps
        what is recorded there. Without a log the questions live in this broker alone."""
        super().__init__(timeout_s=timeout_s)
        self._log, self._clock = log, clock
        # The questions of the log, folded in memory from ``_read_from`` on: open ones, and who closed the rest.
        self._open: dict[str, dict[str, Any]] = {}
        self._closed_by: dict[str, str] = {}
        self._read_from = 1
        self._fold_lock = threading.Lock()

    def asker(self, channel: str, *, request: str = "", gone: threading.Event | None = None):  # noqa: ANN201
        """A turn asker (metnos.runtime.turn.ports.Asker) whose questions wait here, listed with the turn's ``request``."""

        def ask(question: Question) -> tuple[str | None, str]:
            return self.ask(channel, question, request=request, gone=gone)

        return ask

    def ask(self, channel: str, question: Question, *, request: str = "", timeout_s: float | None = None,
            gone: threading.Event | None = None, present: Callable[[PendingDialog], None] | None = None) -> tuple[str | None, str]:
        """Wait for an answer given on any way in (one inbox); ``present`` shows the question on the asking channel
        as well (a message in the chat). The answer, and who gave it as ``"<channel>:<how>"``; None with why not."""
        wait_s = self.timeout_s if timeout_s is None else timeout_s
        pending = make_item(PendingDialog, channel=channel, timeout_s=wait_s, request=request, question=question)
        if self._log is not None:
            now = self._clock()
            # Now, not with the turn's events: the other ways in must see the question while the turn waits.
            self._log.save_now(DialogRequest.ask(id=UUID(pending.id), at=now, channel=channel, question=question.to_json(),
                                                 request=request, deadline=stamp(now + timedelta(seconds=wait_s))))
        answered = self._hold(pending, present, gone)
        if answered is None:
            return None, f"{channel}:client-gone"
        if not answered:
            return None, f"{channel}:timeout"
        return pending.answer, pending.by

    def _wait(self, pending: PendingDialog, gone: threading.Event | None = None) -> bool | None:
        """True once answered (here or through the log), False at the deadline, None when the client went away;
        a wait that ends unanswered withdraws the question from the log, unless an answer landed there first."""
        if self._log is None:
            return super()._wait(pending, gone)
        while True:
            left = pending.deadline - time.monotonic()
            if pending.answered.wait(max(0.0, min(LOG_POLL_S, GONE_POLL_S, left))):
                return True
            if self._taken_from_log(pending):
                return True
            if gone is not None and gone.is_set():
                return True if not self._close_in_log(pending.id, None, "client-gone") and self._taken_from_log(pending) else None
            if left <= 0:
                return not self._close_in_log(pending.id, None, "timeout") and self._taken_from_log(pending)

    def _taken_from_log(self, pending: PendingDialog) -> bool:
        """Whether the question was answered through another daemon; if so its answer is the pending one's."""
        found = self._request(pending.id)
        if found is None or found.status != ANSWERED:
            return False
        with self._lock:
            if not pending.answered.is_set():
                pending.answer, pending.by = found.answer, found.by
                pending.answered.set()
                self._remember(pending.id, found.by)
        return True

    def _request(self, dialog_id: str) -> DialogRequest | None:
        try:
            found = self._log.repository.get(UUID(dialog_id))
        except (ValueError, AggregateNotFoundError):
            return None
        return found if isinstance(found, DialogRequest) else None

    def _close_in_log(self, dialog_id: str, answer: tuple[str, str] | None, reason: str) -> bool:
        """Record ``answer`` (words, by) or, with None, the question withdrawn for ``reason``; False when it was
        closed first (through another daemon) or is not in the log."""
        if self._log is None:
            return False
        found = self._request(dialog_id)
        if found is None:
            return False
        try:
            if answer is None:
                found.withdraw(reason=reason, at=self._clock())
            else:
                found.give(answer=answer[0], by=answer[1], at=self._clock())
            self._log.save_now(found)
        except (DialogClosed, IntegrityError):
            return False
        return True

    def answer(self, dialog_id: str, text: str, *, by: str, channel: str = "http") -> dict[str, Any]:
        """Answer a waiting question from ``channel`` (``by``: how, on that channel); the first answer counts."""
        if not isinstance(text, str) or not text.strip():
            raise EmptyAnswer('the answer is empty: give it as {"answer": "..."} with the words the question asks for')

        by = by_of(channel, by)
        if self._log is not None:
            first = self.first_answer(dialog_id)
            if first:
                raise self._already(dialog_id, first)
            with self._lock:
                held = dialog_id in self._pending
            if not held and dialog_id not in self._log_open():
                raise self._unknown(dialog_id)
            # In the log first: the answer counts only if no other daemon's came first.
            if not self._close_in_log(dialog_id, (text.strip(), by), ""):
                first = self.first_answer(dialog_id)
                raise self._already(dialog_id, first) if first else self._unknown(dialog_id)
            if not held:
                # The asking daemon, another one, reads the answer from the log.
                with self._lock:
                    self._remember(dialog_id, by)
                return {"id": dialog_id, "answered": True}

        def reply(pending: PendingDialog) -> None:
            pending.answer = text.strip()

        if self._log is None:
            self._settle(dialog_id, by, reply)
            return {"id": dialog_id, "answered": True}
        try:
            self._settle(dialog_id, by, reply)
        except DialogAlreadyAnswered:
            # The asking wait may have read this very answer (written just above) from the log a moment before.
            if self.first_answer(dialog_id) != by:
                raise
        return {"id": dialog_id, "answered": True}

    def first_answer(self, item_id: str) -> str:
        """Who answered ``item_id``, here or (with a log) through any daemon on it; "" when nobody has."""
        found = super().first_answer(item_id)
        if found or self._log is None:
            return found
        self._log_open()
        with self._fold_lock:
            return self._closed_by.get(item_id, "") if not self._closed_by.get(item_id, "").startswith("withdrawn:") else ""

    def knows(self, item_id: str) -> bool:
        if super().knows(item_id):
            return True
        if self._log is None:
            return False
        opened = self._log_open()
        with self._fold_lock:
            return item_id in opened or item_id in self._closed_by

    def withdraw_open(self, reason: str) -> int:
        """Withdraw every question the log holds open (at a start on a log no other daemon writes: whoever asked
        them is gone with the process before, and the turns were closed as abandoned)."""
        if self._log is None:
            return 0
        return sum(1 for key in list(self._log_open(include_past=True)) if self._close_in_log(key, None, reason))

    def _log_open(self, *, include_past: bool = False) -> dict[str, dict[str, Any]]:
        """The questions of the log still open (and, unless ``include_past``, not past their deadline), by id."""
        if self._log is None:
            return {}
        with self._fold_lock:
            for nid, event in self._log.domain_events(self._read_from, topics=_TOPICS):
                self._read_from = nid + 1
                key = event.originator_id.hex
                if isinstance(event, DialogRequest.DialogRequested):
                    self._open[key] = {"id": key, **event.question, "channel": event.channel, "request": event.request,
                                       "deadline": event.deadline}
                else:
                    self._open.pop(key, None)
                    answered = isinstance(event, DialogRequest.DialogRequestAnswered)
                    self._closed_by[key] = event.by if answered else f"withdrawn:{event.reason}"
                    while len(self._closed_by) > 4096:
                        del self._closed_by[next(iter(self._closed_by))]
            found = list(self._open.values())
        now = self._clock()
        return {q["id"]: {**{k: v for k, v in q.items() if k != "deadline"},
                          "seconds_left": max(0, round((parse(q["deadline"]) - now).total_seconds()))}
                for q in found if include_past or parse(q["deadline"]) > now}

    def stop_all(self, by: str) -> int:
        """Leave every question still waiting unanswered (the daemon is stopping): the turns end needs_input."""

        def leave(pending: PendingDialog) -> None:
            pending.answer, pending.by = None, by_of(pending.channel, by)

        left = self._close_all(leave)
        for pending in left:
            self._close_in_log(pending.id, None, by)
        return len(left)

    def leave(self, dialog_id: str, *, by: str) -> bool:
        """Leave one question unanswered (the channel that showed it is stopping); False if it no longer waits."""
        with self._lock:
            pending = self._pending.get(dialog_id)
            if pending is None or pending.answered.is_set():
                return False
            pending.answer, pending.by = None, by_of(pending.channel, by)
            pending.answered.set()
        self._close_in_log(dialog_id, None, by)
        return True

    def pending(self) -> list[dict[str, Any]]:
        """The questions waiting here, then (with a log) those the log holds open for other daemons."""
        own = [p.to_json() for p in self._listed()]
        if self._log is None:
            return own
        held = {p["id"] for p in own}
        return own + [q for q in self._log_open().values() if q["id"] not in held]
