"""Questions a turn asks a person who answers elsewhere (the dashboard, the HTTP API): the atomic dialog.

A turn's asker blocks on :meth:`DialogBroker.ask` until someone answers
through :meth:`answer`, or the time runs out: then there is no answer and the
turn ends ``needs_input``, saying so (nothing is guessed in its place). The
question and its answer are recorded by the turn (``DialogAsked``,
``DialogAnswered``); the broker only carries them across threads, as
metnos.services.approvals does for approvals.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from domain.errors import MetnosError
from metnos.runtime.step.dialog_tools import Question


class DialogUnknown(MetnosError):
    """No pending question with that id (answered already, timed out, or never asked)."""


class EmptyAnswer(MetnosError):
    """An answer with no words in it."""


@dataclass
class PendingDialog:
    id: str
    question: Question
    asked_at: float
    deadline: float
    answered: threading.Event = field(default_factory=threading.Event)
    answer: str | None = None
    by: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **self.question.to_json(), "seconds_left": max(0, round(self.deadline - time.monotonic()))}


class DialogBroker:
    def __init__(self, *, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._pending: dict[str, PendingDialog] = {}
        self._lock = threading.Lock()

    def asker(self, channel: str):  # noqa: ANN201
        """A turn asker (metnos.runtime.turn.ports.Asker) whose questions wait here; answers are said to come from ``channel``."""

        def ask(question: Question) -> tuple[str | None, str]:
            return self.ask(channel, question)

        return ask

    def ask(self, channel: str, question: Question) -> tuple[str | None, str]:
        now = time.monotonic()
        pending = PendingDialog(id=uuid4().hex, question=question, asked_at=now, deadline=now + self.timeout_s)
        with self._lock:
            self._pending[pending.id] = pending
        try:
            if not pending.answered.wait(self.timeout_s):
                return None, f"{channel}:timeout"
            return pending.answer, f"{channel}:{pending.by}"
        finally:
            with self._lock:
                self._pending.pop(pending.id, None)

    def answer(self, dialog_id: str, text: str, *, by: str) -> dict[str, Any]:
        if not text.strip():
            raise EmptyAnswer('the answer is empty: give it as {"answer": "..."} with the words the question asks for')
        with self._lock:
            pending = self._pending.get(dialog_id)
            if pending is None or pending.answered.is_set():
                raise DialogUnknown(f"no pending question {dialog_id!r}: it was answered, timed out, or never asked")
            pending.answer, pending.by = text.strip(), by
            pending.answered.set()
        return {"id": dialog_id, "answered": True}

    def stop_all(self, by: str) -> int:
        """Leave every question still waiting unanswered (the daemon is stopping): the turns end needs_input."""
        with self._lock:
            waiting = [p for p in self._pending.values() if not p.answered.is_set()]
            for pending in waiting:
                pending.answer, pending.by = None, by
                pending.answered.set()
        return len(waiting)

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [p.to_json() for p in sorted(self._pending.values(), key=lambda p: p.asked_at)]
