"""The scheduler's tick: find what is due, fire it, record every attempt.

One tick at a time per workspace: a tick (and a run-now) holds an exclusive
``flock`` on ``.runtime/scheduler.lock``, released by the kernel if the
process dies. On a log shared by several machines (PostgreSQL) it also holds
the log's ``scheduler`` advisory lock (metnos/mechanisms/store/shared_lock.py),
released by the server if the process dies: one tick at a time across every
daemon of the log. So a firing found open in the log while we hold the lock
was cut short by a crash, never one running elsewhere, and is resolved as
policy.py says.

The order of writes makes the due check idempotent:

1. ``FiringStarted(slot, attempt)`` is committed alone, before the target
   runs: the slot is taken, and a second tick (or a restart) cannot fire
   it again as new.
2. The target runs; its Invocation events, ``FiringFinished``, the delivery
   or notice invocation and any lifecycle event (completed, cancelled) are
   committed together in one ``log.save``.

A crash before 1 leaves the slot owed (it fires on the next tick, within
the grace window); a crash between 1 and 2 leaves an open attempt that the
next tick resolves explicitly. An exception in one schedule is reported and
the tick goes on with the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.household import HOST
from domain.schedule import ACTIVE, PAUSED, Schedule
from domain.errors import MetnosError
from metnos.mechanisms.store.shared_lock import SharedLockBusy, shared_lock
from metnos.runtime.scheduler import firing, policy
from domain.due import due, stamp
from projections.schedules import due_ids


class SchedulerBusy(MetnosError):
    """Another tick or run-now holds the scheduler lock."""


@contextmanager
def scheduler_lock(runtime_dir: Any, *, log: Any = None, wait_s: float = 0.0) -> Iterator[None]:
    """This workspace's scheduler lock and, with ``log`` shared by other machines, the log's."""
    runtime_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(runtime_dir / "scheduler.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SchedulerBusy("the scheduler is busy (a tick or run-now is in progress); try again") from None
                time.sleep(0.05)
        try:
            if log is None:
                yield
            else:
                with _across_the_log(log, max(0.0, deadline - time.monotonic())):
                    yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def _across_the_log(log: Any, wait_s: float) -> Iterator[None]:
    try:
        lock = shared_lock(log, "scheduler", wait_s=wait_s)
        lock.__enter__()
    except SharedLockBusy:
        msg = "the scheduler is busy (another daemon sharing this log is ticking, or a run-now is in progress); try again"
        raise SchedulerBusy(msg) from None
    # Entered by hand so that the busy error is told apart from one of the body's.
    with contextlib.ExitStack() as held:
        held.push(lock.__exit__)
        yield


@dataclass
class TickReport:
    now: str
    looked: int = 0
    firings: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    closed: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    busy: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"now": self.now, "looked": self.looked, "firings": self.firings, "skipped": self.skipped,
                "closed": self.closed, "errors": self.errors, "busy": self.busy}


def _silent(schedule: Schedule, result: firing.Attempt) -> bool:
    """A builtin job tells the user only its ``content``; without one it has nothing to say."""
    return schedule.target.get("kind") == "callback" and not (isinstance(result.output, dict) and result.output.get("content"))


# A port the daemon gives: (schedule id, channel, body) -> the notice of a message queued in its outbox, or None
# when the outbox does not serve that channel (the message then goes through send_messages, as it always has).
Deliver = Callable[[str, str, str], "dict[str, Any] | None"]


class Scheduler:
    def __init__(self, runtime: Any, clock: Callable[[], datetime] | None = None,
                 models: Callable[[str], Any] | None = None, deliver: Deliver | None = None) -> None:
        self.runtime = runtime
        self.clock = clock or runtime.clock
        # tier -> provider, for the builtin jobs that draft through the model.
        self.models = models
        # The daemon's outbox, for the channels it serves (metnos/services/delivery.py); else send_messages.
        self.deliver = deliver
        self.view = runtime.schedules
        # The folded store, kept between ticks while the log has not moved.
        self._cached: tuple[int, dict[str, Any]] | None = None

    # The tick ---------------------------------------------------------------
    def tick(self) -> TickReport:
        try:
            with scheduler_lock(self.runtime.workspace.runtime_dir, log=self.runtime.log):
                return self._tick()
        except SchedulerBusy:
            return TickReport(now=stamp(self.clock()), busy=True)

    def _store(self) -> dict[str, Any]:
        head = self.runtime.log.recorder.max_notification_id() or 0
        if self._cached is not None and self._cached[0] == head:
            return self._cached[1]
        state = self.view.catch_up(self.runtime.log)
        self._cached = (head, state)
        return state

    def _tick(self) -> TickReport:
        state = self._store()
        now = self.clock()
        report = TickReport(now=stamp(now))
        for sid in due_ids(state, report.now):
            report.looked += 1
            try:
                self.serve(sid, now, report)
            except Exception as e:  # noqa: BLE001 - one schedule's trouble must not stop the loop
                report.errors.append({"schedule_id": sid, "error": f"{type(e).__name__}: {e}", "traceback": "".join(traceback.format_exception(e))[-2000:]})
        if report.firings or report.skipped or report.closed or report.errors:
            # The audit lines and the schedule store follow what this tick wrote.
            self.runtime.refresh()
        return report

    def serve(self, sid: str, now: datetime, report: TickReport) -> None:
        schedule: Schedule = self.runtime.log.repository.get(UUID(sid))
        if schedule.open is not None:
            self._resolve_open(schedule, report)
        if schedule.status not in (ACTIVE,):
            return
        if schedule.count is not None and schedule.fired >= schedule.count:
            self._close(schedule, "count", report)
            return
        owed = due(schedule.cron, schedule.timezone, schedule.cursor, now, grace_s=schedule.grace_s, expiry=schedule.expiry)
        if owed.skipped is not None:
            first, last, missed = owed.skipped
            schedule.skip(first=first, last=last, missed=missed, reason="outside the grace window", at=self.clock())
            self.runtime.log.save(schedule)
            report.skipped.append({"schedule_id": sid, "first": first, "last": last, "missed": missed})
        for slot in owed.fire:
            if schedule.status != ACTIVE:
                break
            self.fire(schedule, slot, report=report)
        if owed.expired and schedule.status in (ACTIVE, PAUSED) and schedule.open is None:
            self._close(schedule, "expiry", report)

    def _close(self, schedule: Schedule, reason: str, report: TickReport) -> None:
        schedule.complete(reason=reason, at=self.clock())
        self.runtime.log.save(schedule)
        report.closed.append({"schedule_id": str(schedule.id), "status": "completed", "reason": reason})

    # Firing ----------------------------------------------------------------
    def fire(self, schedule: Schedule, slot: str, *, attempt: int = 1, recovery: bool = False, manual: bool = False,
             report: TickReport | None = None) -> dict[str, Any]:
        """Run ``slot`` from ``attempt`` on until a final attempt; returns the last attempt's record."""
        sid = str(schedule.id)
        while True:
            schedule.start_firing(slot=slot, attempt=attempt, recovery=recovery, manual=manual, at=self.clock())
            self.runtime.log.save(schedule)
            result = firing.run_target(self.runtime, sid, schedule.target, schedule.args, self.clock(),
                                       approval=schedule.approval, intent=schedule.label, models=self.models,
                                       actor=getattr(schedule, "actor", HOST))
            record = self._finish(schedule, slot, attempt, result, manual=manual)
            if report is not None:
                report.firings.append(record)
                if record.get("closed"):
                    report.closed.append({"schedule_id": sid, **record["closed"]})
            if record["final"]:
                return record
            attempt += 1
            recovery = record["action"] == "recover"

    def _finish(self, schedule: Schedule, slot: str, attempt: int, result: firing.Attempt, *, manual: bool) -> dict[str, Any]:
        decision = policy.after_attempt(
            on_failure=schedule.on_failure, ok=result.ok, kind=result.kind, attempt=attempt,
            idempotent=firing.is_idempotent(self.runtime, schedule.target), manual=manual,
            consecutive_failures=schedule.consecutive_failures, max_consecutive_failures=schedule.max_consecutive_failures,
        )
        sid = str(schedule.id)
        notice, extra = None, []
        if decision.final:
            notice, extra = self._tell(schedule, slot, result, decision)
        schedule.finish_firing(
            slot=slot, attempt=attempt, ok=result.ok, kind=result.kind, final=decision.final, action=decision.action,
            invocation_ids=result.invocation_ids, error=result.error, notice=notice, at=self.clock(),
        )
        closed = None
        if decision.final and not manual:
            if decision.cancel is not None:
                schedule.cancel(reason=decision.cancel, by="scheduler", at=self.clock())
                closed = {"status": "cancelled", "reason": decision.cancel}
            elif schedule.count is not None and schedule.fired >= schedule.count:
                schedule.complete(reason="count", at=self.clock())
                closed = {"status": "completed", "reason": "count"}
        self.runtime.log.save(schedule, *result.invocations, *extra, *result.aggregates)
        return {"schedule_id": sid, "slot": slot, "attempt": attempt, "ok": result.ok, "kind": result.kind,
                "final": decision.final, "action": decision.action, "manual": manual, "closed": closed,
                "invocation_ids": result.invocation_ids, "notice": notice}

    def _tell(self, schedule: Schedule, slot: str, result: firing.Attempt, decision: policy.Decision) -> tuple[dict[str, Any] | None, list[Any]]:
        """Deliver a result to the schedule's channel, or a failure notice to the user."""
        sid = str(schedule.id)
        name = schedule.label or sid
        if result.ok:
            if schedule.channel == "none" or result.kind == "unavailable" or _silent(schedule, result):
                return None, []
            body = f"[{name}] {slot}: {firing.summary(result.output)}"
            return self._send(sid, schedule.channel, body)
        elif decision.action == "notify" or decision.cancel is not None:
            # A failure is told even when results go nowhere: the outbox is the user's inbox.
            channel = schedule.channel if schedule.channel != "none" else "outbox"
            message = (result.error or {}).get("message") or result.kind
            body = f"[{name}] the firing at {slot} failed ({result.kind}): {message}"
            if decision.cancel is not None:
                body += f"; the schedule is cancelled ({decision.cancel})"
            return self._send(sid, channel, body)
        return None, []

    def _send(self, sid: str, channel: str, body: str) -> tuple[dict[str, Any] | None, list[Any]]:
        """A message to the user: queued in the daemon's outbox when it serves ``channel`` (sent, retried with
        backoff, given up after the bound and then in the inbox, as a turn's answer is), else through send_messages."""
        if self.deliver is not None:
            queued = self.deliver(sid, channel, firing.clipped(body))
            if queued is not None:
                return queued, []
        notice, invocation = firing.send(self.runtime, sid, channel, body)
        return notice, [invocation] if invocation is not None else []

    def _resolve_open(self, schedule: Schedule, report: TickReport) -> None:
        """An attempt left open by a crash, or a retry owed when the process stopped."""
        open_ = dict(schedule.open)
        slot, attempt, manual = open_["slot"], open_["attempt"], open_["manual"]
        if open_["phase"] == "retry":
            self.fire(schedule, slot, attempt=attempt + 1, manual=manual, report=report)
            return
        interrupted = firing.Attempt(False, policy.INTERRUPTED, error={"message": "the scheduler stopped during this attempt; whether the target ran is unknown"})
        record = self._finish(schedule, slot, attempt, interrupted, manual=manual)
        report.firings.append(record)
        if record.get("closed"):
            report.closed.append({"schedule_id": str(schedule.id), **record["closed"]})
        if not record["final"]:
            self.fire(schedule, slot, attempt=attempt + 1, recovery=True, manual=manual, report=report)

    # Run now -----------------------------------------------------------------
    def run_now(self, sid: str, *, wait_s: float = 30.0) -> dict[str, Any]:
        with scheduler_lock(self.runtime.workspace.runtime_dir, log=self.runtime.log, wait_s=wait_s):
            schedule: Schedule = self.runtime.log.repository.get(UUID(sid))
            if schedule.closed:
                raise MetnosError(f"the schedule is {schedule.status}; it cannot run")
            report = TickReport(now=stamp(self.clock()))
            if schedule.open is not None:
                self._resolve_open(schedule, report)
            record = self.fire(schedule, stamp(self.clock()), manual=True)
            self.runtime.refresh()
            return record
