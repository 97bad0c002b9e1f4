"""Approvals asked of a person who answers elsewhere (the dashboard, the HTTP API).

A turn's approver blocks on :meth:`ApprovalBroker.ask` until someone answers
through :meth:`answer`, or the time runs out, which is a no (fail closed).
The question and its answer are recorded by the turn (``ApprovalAnswered``);
the broker only carries them across threads.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from domain.errors import MetnosError


class ApprovalUnknown(MetnosError):
    """No pending approval with that id (answered already, timed out, or never asked)."""


@dataclass
class PendingApproval:
    id: str
    channel: str
    step: int
    executor: str
    args: dict[str, Any]
    reason: str
    asked_at: float
    deadline: float
    answered: threading.Event = field(default_factory=threading.Event)
    approved: bool = False
    by: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "channel": self.channel, "step": self.step, "executor": self.executor, "args": self.args,
                "reason": self.reason, "seconds_left": max(0, round(self.deadline - time.monotonic()))}


# How often a waiting approval looks whether its client went away.
GONE_POLL_S = 0.25


class ApprovalBroker:
    def __init__(self, *, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._pending: dict[str, PendingApproval] = {}
        self._lock = threading.Lock()

    def approver(self, channel: str, *, gone: threading.Event | None = None):  # noqa: ANN201
        """A turn approver (metnos.runtime.turn.ports.Approver) whose questions wait here; ``gone``, once set
        (the client that asked went away), refuses what waits instead of holding the turn to the timeout."""

        def approve(step: int, executor: str, args: dict[str, Any], reason: str) -> tuple[bool, str]:
            return self.ask(channel, step, executor, args, reason, gone=gone)

        return approve

    def ask(self, channel: str, step: int, executor: str, args: dict[str, Any], reason: str, *,
            gone: threading.Event | None = None) -> tuple[bool, str]:
        now = time.monotonic()
        pending = PendingApproval(id=uuid4().hex, channel=channel, step=step, executor=executor, args=args, reason=reason,
                                  asked_at=now, deadline=now + self.timeout_s)
        with self._lock:
            self._pending[pending.id] = pending
        try:
            while not pending.answered.wait(min(GONE_POLL_S, max(0.0, pending.deadline - time.monotonic()))):
                if gone is not None and gone.is_set():
                    return False, f"{channel}:client-gone"
                if time.monotonic() >= pending.deadline:
                    return False, f"{channel}:timeout"
            return pending.approved, f"{channel}:{pending.by}"
        finally:
            with self._lock:
                self._pending.pop(pending.id, None)

    def answer(self, approval_id: str, *, approved: bool, by: str) -> dict[str, Any]:
        with self._lock:
            pending = self._pending.get(approval_id)
            if pending is None or pending.answered.is_set():
                raise ApprovalUnknown(f"no pending approval {approval_id!r}: it was answered, timed out, or never asked")
            pending.approved, pending.by = approved, by
            pending.answered.set()
        return {"id": approval_id, "approved": approved}

    def refuse_all(self, by: str) -> int:
        """Answer no to every question still waiting (the daemon is stopping): the turns end, refused."""
        with self._lock:
            waiting = [p for p in self._pending.values() if not p.answered.is_set()]
            for pending in waiting:
                pending.approved, pending.by = False, by
                pending.answered.set()
        return len(waiting)

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [p.to_json() for p in sorted(self._pending.values(), key=lambda p: p.asked_at)]
