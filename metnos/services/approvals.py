"""Approvals asked of a person who answers elsewhere (the dashboard, the HTTP API).

A turn's approver blocks on :meth:`ApprovalBroker.ask` until someone answers
through :meth:`answer`, or the time runs out, which is a no (fail closed).
The question and its answer are recorded by the turn (``ApprovalAnswered``);
the broker only carries them across threads.

With a log shared by several daemons (PostgreSQL, docs/scale-out.md) the
broker also carries them across daemons: the question is put in the log
(``ApprovalRequest``, domain/approval.py) as it is asked, each daemon lists
the open questions of the log beside its own, an answer given through any
daemon is recorded there, and the asking daemon looks for it while it waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError
from eventsourcing.utils import get_topic

from domain.approval import DECIDED, ApprovalClosed, ApprovalRequest
from domain.due import parse, stamp
from metnos.services.pending import GONE_POLL_S, AlreadyAnswered, Pending, PendingBroker, PendingUnknown, by_of, make_item

# How often a daemon waiting on a shared question looks for an answer given through another.
SHARED_POLL_S = 0.25
_TOPICS = tuple(get_topic(e) for e in (ApprovalRequest.ApprovalRequested, ApprovalRequest.ApprovalDecided,
                                       ApprovalRequest.ApprovalWithdrawn))


class ApprovalUnknown(PendingUnknown):
    """No pending approval with that id (answered already, timed out, or never asked)."""


class ApprovalAlreadyAnswered(AlreadyAnswered, ApprovalUnknown):
    """The approval was answered already, on this or another way in: the first answer counts."""


@dataclass
class PendingApproval(Pending):
    step: int = 0
    executor: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    approved: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "channel": self.channel, "step": self.step, "executor": self.executor, "args": self.args,
                "reason": self.reason, "request": self.request, "seconds_left": self.seconds_left()}


class ApprovalBroker(PendingBroker[PendingApproval]):
    what = "approval"
    unknown = ApprovalUnknown
    already = ApprovalAlreadyAnswered

    def __init__(self, *, timeout_s: float, shared_log: Any = None, clock: Callable[[], datetime] | None = None) -> None:
        """``shared_log``: the log other daemons write too, through which questions and answers pass; ``clock``
        stamps what is recorded there."""
        super().__init__(timeout_s=timeout_s)
        self._log, self._clock = shared_log, clock
        # The open questions of the shared log, folded in memory from ``_read_from`` on.
        self._shared: dict[str, dict[str, Any]] = {}
        self._read_from = 1
        self._fold_lock = threading.Lock()

    def approver(self, channel: str, *, gone: threading.Event | None = None, request: str = ""):  # noqa: ANN201
        """A turn approver (metnos.runtime.turn.ports.Approver) whose questions wait here; ``gone``, once set
        (the client that asked went away), refuses what waits instead of holding the turn to the timeout."""

        def approve(step: int, executor: str, args: dict[str, Any], reason: str) -> tuple[bool, str]:
            return self.ask(channel, step, executor, args, reason, gone=gone, request=request)

        return approve

    def ask(self, channel: str, step: int, executor: str, args: dict[str, Any], reason: str, *,
            gone: threading.Event | None = None, request: str = "", timeout_s: float | None = None,
            present: Callable[[PendingApproval], None] | None = None) -> tuple[bool, str]:
        """Wait for an answer given on any way in (one inbox): the dashboard and the API list the question
        whichever channel asked; ``present`` shows it on the asking channel as well (Telegram's buttons),
        once it is listed. The first answer counts; ``by`` names the way in that gave it."""
        pending = make_item(PendingApproval, channel=channel, timeout_s=self.timeout_s if timeout_s is None else timeout_s,
                            request=request, step=step, executor=executor, args=args, reason=reason)
        if self._log is not None:
            self._publish(pending)
        answered = self._hold(pending, present, gone)
        if answered is None:
            return False, f"{channel}:client-gone"
        if not answered:
            return False, f"{channel}:timeout"
        return pending.approved, pending.by

    def _wait(self, pending: PendingApproval, gone: threading.Event | None = None) -> bool | None:
        """True once answered, False at the deadline, None when the client that asked went away."""
        if self._log is None:
            return super()._wait(pending, gone)
        while True:
            left = pending.deadline - time.monotonic()
            if pending.answered.wait(max(0.0, min(SHARED_POLL_S, GONE_POLL_S, left))):
                return True
            if self._taken_from_log(pending):
                return True
            if gone is not None and gone.is_set() and not self._close_in_log(pending.id, None, "client-gone"):
                return None
            if left <= 0:
                # Withdrawn, unless an answer came between the look and the withdrawal.
                return not self._close_in_log(pending.id, None, "timeout") and self._taken_from_log(pending)

    def _publish(self, pending: PendingApproval) -> None:
        now = self._clock()
        request = ApprovalRequest.ask(id=UUID(pending.id), at=now, channel=pending.channel, step=pending.step,
                                      executor=pending.executor, args=pending.args, reason=pending.reason,
                                      deadline=stamp(now + timedelta(seconds=self.timeout_s)))
        # Now, not with the turn's events: the other daemons must see the question while the turn waits.
        self._log.save_now(request)

    def _taken_from_log(self, pending: PendingApproval) -> bool:
        """Whether the question was answered through another daemon; if so its answer is the pending one's."""
        request = self._log.repository.get(UUID(pending.id))
        if request.status != DECIDED:
            return False
        pending.approved, pending.by = request.approved, request.by
        return True

    def _close_in_log(self, approval_id: str, answer: tuple[bool, str] | None, reason: str) -> bool:
        """Record ``answer`` (or, with None, the question withdrawn for ``reason``) unless another daemon closed it first."""
        try:
            request = self._log.repository.get(UUID(approval_id))
            if answer is None:
                request.withdraw(reason=reason, at=self._clock())
            else:
                request.decide(approved=answer[0], by=answer[1], at=self._clock())
            self._log.save_now(request)
        except (ApprovalClosed, IntegrityError):
            return False
        return True

    def answer(self, approval_id: str, *, approved: bool, by: str, channel: str = "http") -> dict[str, Any]:
        """Answer a waiting question from ``channel`` (``by``: how, on that channel). A question already
        answered is refused, naming the way in whose answer counted."""
        first = self.first_answer(approval_id)
        if first:
            raise self._already(approval_id, first)
        by = by_of(channel, by)
        if self._log is not None:
            with self._lock:
                held = approval_id in self._pending
            # In the log first: the answer counts only if no other daemon's came first.
            if (not held and approval_id not in self._shared_open()) or not self._close_in_log(approval_id, (approved, by), ""):
                raise self._unknown(approval_id)
            if not held:
                return {"id": approval_id, "approved": approved}

        def decide(pending: PendingApproval) -> None:
            pending.approved = approved

        self._settle(approval_id, by, decide)
        return {"id": approval_id, "approved": approved, "by": by}

    def refuse_all(self, by: str) -> int:
        """Answer no to every question still waiting (the daemon is stopping): the turns end, refused."""

        def refuse(pending: PendingApproval) -> None:
            pending.approved, pending.by = False, f"{pending.channel}:{by}"

        waiting = self._close_all(refuse)
        if self._log is not None:
            for pending in waiting:
                self._close_in_log(pending.id, None, by)
        return len(waiting)

    def pending(self) -> list[dict[str, Any]]:
        own = [p.to_json() for p in self._listed()]
        if self._log is None:
            return own
        held = {p["id"] for p in own}
        return own + [q for q in self._shared_open().values() if q["id"] not in held]

    def _shared_open(self) -> dict[str, dict[str, Any]]:
        """The questions of the shared log still open and not past their deadline, by id."""
        with self._fold_lock:
            for nid, event in self._log.domain_events(self._read_from, topics=_TOPICS):
                self._read_from = nid + 1
                key = event.originator_id.hex
                if isinstance(event, ApprovalRequest.ApprovalRequested):
                    self._shared[key] = {"id": key, "channel": event.channel, "step": event.step, "executor": event.executor,
                                         "args": event.args, "reason": event.reason, "deadline": event.deadline}
                else:
                    self._shared.pop(key, None)
            shared = list(self._shared.values())
        now = self._clock()
        return {q["id"]: {**{k: v for k, v in q.items() if k != "deadline"},
                          "seconds_left": round((parse(q["deadline"]) - now).total_seconds())}
                for q in shared if parse(q["deadline"]) > now}
