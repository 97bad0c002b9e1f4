"""A question a turn waits on, put in the log so that every daemon on it, and the next start, sees it.

The asking daemon records ``DialogRequested`` (the question, the request it is
for, when it stops waiting); whichever daemon the person answers through
records ``DialogRequestAnswered`` with the words and who gave them; the asker
records ``DialogRequestWithdrawn`` when its wait ends unanswered (timed out,
stopped, the client gone). The first of the last two wins: both are the
aggregate's second event, and the log takes one of them. The turn still
records its own ``DialogAsked`` and ``DialogAnswered``, as it always has: this
aggregate only carries the question between processes.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from domain.base import Created, DomainEvent, MetnosAggregate
from domain.errors import MetnosError

OPEN, ANSWERED, WITHDRAWN = "open", "answered", "withdrawn"


class DialogClosed(MetnosError):
    """The question was answered, or withdrawn, already."""


class DialogRequest(MetnosAggregate):
    class DialogRequested(Created):
        channel: str
        # The question as the turn asked it (metnos/runtime/step/dialog_tools.py, Question.to_json()).
        question: dict
        # The turn's request, so that whoever answers sees what it is for.
        request: str
        # The moment the asker stops waiting (ISO 8601, the asker's clock).
        deadline: str

    class DialogRequestAnswered(DomainEvent):
        answer: str
        by: str

        def apply(self, d: DialogRequest) -> None:
            d.status, d.answer, d.by = ANSWERED, self.answer, self.by

    class DialogRequestWithdrawn(DomainEvent):
        reason: str

        def apply(self, d: DialogRequest) -> None:
            d.status, d.by = WITHDRAWN, self.reason

    def __init__(self, channel: str, question: dict, request: str, deadline: str) -> None:
        self.channel, self.question, self.request, self.deadline = channel, question, request, deadline
        self.status = OPEN
        self.answer: str | None = None
        self.by = ""

    @classmethod
    def ask(cls, *, id: UUID, at: Any, channel: str, question: dict, request: str, deadline: str) -> DialogRequest:  # noqa: A002
        return cls._create(cls.DialogRequested, id=id, timestamp=at, channel=channel, question=question, request=request,
                           deadline=deadline)

    def give(self, *, answer: str, by: str, at: Any) -> None:
        self._still_open()
        self.trigger_event(self.DialogRequestAnswered, timestamp=at, answer=answer, by=by)

    def withdraw(self, *, reason: str, at: Any) -> None:
        self._still_open()
        self.trigger_event(self.DialogRequestWithdrawn, timestamp=at, reason=reason)

    def _still_open(self) -> None:
        if self.status != OPEN:
            raise DialogClosed(f"question {self.id} was {self.status} already")
