"""Questions a turn asks a person who answers elsewhere (the dashboard, the HTTP API): the atomic dialog.

A turn's asker blocks on :meth:`DialogBroker.ask` until someone answers
through :meth:`answer`, or the time runs out: then there is no answer and the
turn ends ``needs_input``, saying so (nothing is guessed in its place). The
question and its answer are recorded by the turn (``DialogAsked``,
``DialogAnswered``); the broker only carries them across threads, as
metnos.services.approvals does for approvals.
"""

from __future__ import annotations

from collections.abc import Callable

import threading
from dataclasses import dataclass, field
from typing import Any

from domain.errors import MetnosError
from metnos.runtime.step.dialog_tools import Question
from metnos.services.pending import AlreadyAnswered, Pending, PendingBroker, PendingUnknown, by_of, make_item


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

    def asker(self, channel: str, *, request: str = "", gone: threading.Event | None = None):  # noqa: ANN201
        """A turn asker (metnos.runtime.turn.ports.Asker) whose questions wait here, listed with the turn's ``request``."""

        def ask(question: Question) -> tuple[str | None, str]:
            return self.ask(channel, question, request=request, gone=gone)

        return ask

    def ask(self, channel: str, question: Question, *, request: str = "", timeout_s: float | None = None,
            gone: threading.Event | None = None, present: Callable[[PendingDialog], None] | None = None) -> tuple[str | None, str]:
        """Wait for an answer given on any way in (one inbox); ``present`` shows the question on the asking channel
        as well (a message in the chat). The answer, and who gave it as ``"<channel>:<how>"``; None with why not."""
        pending = make_item(PendingDialog, channel=channel, timeout_s=self.timeout_s if timeout_s is None else timeout_s,
                            request=request, question=question)
        answered = self._hold(pending, present, gone)
        if answered is None:
            return None, f"{channel}:client-gone"
        if not answered:
            return None, f"{channel}:timeout"
        return pending.answer, pending.by

    def answer(self, dialog_id: str, text: str, *, by: str, channel: str = "http") -> dict[str, Any]:
        """Answer a waiting question from ``channel`` (``by``: how, on that channel); the first answer counts."""
        if not isinstance(text, str) or not text.strip():
            raise EmptyAnswer('the answer is empty: give it as {"answer": "..."} with the words the question asks for')

        def reply(pending: PendingDialog) -> None:
            pending.answer = text.strip()

        self._settle(dialog_id, by_of(channel, by), reply)
        return {"id": dialog_id, "answered": True}

    def stop_all(self, by: str) -> int:
        """Leave every question still waiting unanswered (the daemon is stopping): the turns end needs_input."""

        def leave(pending: PendingDialog) -> None:
            pending.answer, pending.by = None, by_of(pending.channel, by)

        return len(self._close_all(leave))

    def leave(self, dialog_id: str, *, by: str) -> bool:
        """Leave one question unanswered (the channel that showed it is stopping); False if it no longer waits."""
        with self._lock:
            pending = self._pending.get(dialog_id)
            if pending is None or pending.answered.is_set():
                return False
            pending.answer, pending.by = None, by_of(pending.channel, by)
            pending.answered.set()
        return True

    def pending(self) -> list[dict[str, Any]]:
        return [p.to_json() for p in self._listed()]
