"""A question a turn waits on, put in a log shared by several daemons so that any of them can answer it.

On one machine the question lives in the daemon that asks it. When daemons
of several machines share a PostgreSQL log, the asking daemon records
``ApprovalRequested``; whichever daemon the person answers through records
``ApprovalDecided``; the asker records ``ApprovalWithdrawn`` when its wait
ends unanswered (timed out, the daemon stopping). The first of the last two
wins: both are the aggregate's second event, and the log takes one of them.
The turn still records its own ``ApprovalAnswered``, as it always has.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from domain.base import Created, DomainEvent, MetnosAggregate
from domain.errors import MetnosError

OPEN, DECIDED, WITHDRAWN = "open", "decided", "withdrawn"


class ApprovalClosed(MetnosError):
    """The question was answered, or withdrawn, already."""


class ApprovalRequest(MetnosAggregate):
    class ApprovalRequested(Created):
        channel: str
        step: int
        executor: str
        args: dict
        reason: str
        # The moment the asker stops waiting (ISO 8601, the asker's clock).
        deadline: str

    class ApprovalDecided(DomainEvent):
        approved: bool
        by: str

        def apply(self, request: ApprovalRequest) -> None:
            request.status, request.approved, request.by = DECIDED, self.approved, self.by

    class ApprovalWithdrawn(DomainEvent):
        reason: str

        def apply(self, request: ApprovalRequest) -> None:
            request.status = WITHDRAWN

    def __init__(self, channel: str, step: int, executor: str, args: dict, reason: str, deadline: str) -> None:
        self.channel, self.step, self.executor, self.args, self.reason, self.deadline = channel, step, executor, args, reason, deadline
        self.status = OPEN
        self.approved = False
        self.by = ""

    @classmethod
    def ask(cls, *, id: UUID, at: Any, channel: str, step: int, executor: str, args: dict, reason: str, deadline: str) -> ApprovalRequest:
        return cls._create(cls.ApprovalRequested, id=id, timestamp=at, channel=channel, step=step, executor=executor, args=args,
                           reason=reason, deadline=deadline)

    def decide(self, *, approved: bool, by: str, at: Any) -> None:
        self._still_open()
        self.trigger_event(self.ApprovalDecided, timestamp=at, approved=approved, by=by)

    def withdraw(self, *, reason: str, at: Any) -> None:
        self._still_open()
        self.trigger_event(self.ApprovalWithdrawn, timestamp=at, reason=reason)

    def _still_open(self) -> None:
        if self.status != OPEN:
            raise ApprovalClosed(f"approval {self.id} was {self.status} already")
