"""A request with a schedule (seeds/000 "scheduler", seeds/002 ch. 11.2), as events.

A schedule invokes a target (an executor, a chain of executors, or a builtin
maintenance callback named by a string key) at the slots of a cron
expression. Its lifecycle:

    active <-> paused;  active | paused -> completed | cancelled

The *slot* (the cron time being served) is the idempotency key of a firing.
``FiringStarted`` is committed before the target runs, so a slot whose start
is in the log is never fired again as a fresh firing; ``cursor`` is the
latest slot the schedule has served or deliberately passed over, and only
slots after it can become due. A firing has one or more *attempts* (a retry,
or the recovery of an attempt interrupted by a crash); ``FiringFinished``
with ``final`` closes the slot.

Timestamps are ISO strings in UTC with microseconds (fixed width), so they
compare as strings; the caller computes them.
"""

from __future__ import annotations

from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate, name_id

ACTIVE = "active"
PAUSED = "paused"
COMPLETED = "completed"
CANCELLED = "cancelled"
STATES = (ACTIVE, PAUSED, COMPLETED, CANCELLED)

ON_FAILURE = ("skip", "retry", "notify", "cancel")
TARGET_KINDS = ("executor", "chain", "callback")
CHANNELS = ("none", "outbox", "telegram")
# A slot's attempts: the first, then one retry or one recovery.
MAX_ATTEMPTS = 2


class ScheduleError(ValueError):
    """A command the schedule's state does not allow (e.g. resuming a cancelled schedule)."""


def builtin_schedule_id(key: str):  # noqa: ANN201 - a UUID
    """Builtin jobs have a stable id, so installing them twice is a no-op."""
    return name_id("schedule", f"builtin:{key}")


class Schedule(MetnosAggregate):
    class ScheduleCreated(Created):
        target: dict
        args: dict
        cron: str
        timezone: str
        channel: str
        count: int | None
        expiry: str | None
        on_failure: str
        max_consecutive_failures: int | None
        paused: bool
        grace_s: int
        label: str
        owner: str
        since: str
        # Who created it, and so who it fires as (seeds/002 ch. 11.2.4); schedules created before actors were the host's.
        actor: str = "host"

    class ScheduleApproved(DomainEvent):
        """The user's approval of what each firing may do: the target and
        its argument template, by digest. A firing whose target or
        arguments hash differently runs nothing."""

        template: str
        executors: list
        by: str
        turn_id: str | None
        reason: str

        def apply(self, s: Schedule) -> None:
            s.approval = {"template": self.template, "executors": list(self.executors), "by": self.by, "turn_id": self.turn_id}

    class ScheduleConfirmed(DomainEvent):
        """The user's yes to a schedule shown back before it was saved: the cron and the
        firings they were shown (committed with the creation, so an unconfirmed one is not in the log)."""

        by: str
        cron: str
        next_fires: list

        def apply(self, s: Schedule) -> None:
            s.confirmed_by = self.by

    class SchedulePaused(DomainEvent):
        by: str

        def apply(self, s: Schedule) -> None:
            s.status = PAUSED

    class ScheduleResumed(DomainEvent):
        by: str
        since: str

        def apply(self, s: Schedule) -> None:
            # Slots that fell while paused are not owed.
            s.status = ACTIVE
            s.cursor = max(s.cursor, self.since)

    class ScheduleModified(DomainEvent):
        changes: dict
        by: str
        since: str

        def apply(self, s: Schedule) -> None:
            for key, value in self.changes.items():
                setattr(s, key, value)
            if "cron" in self.changes or "timezone" in self.changes:
                s.cursor = max(s.cursor, self.since)

    class FiringStarted(DomainEvent):
        slot: str
        attempt: int
        recovery: bool
        manual: bool

        def apply(self, s: Schedule) -> None:
            s.open = {"slot": self.slot, "attempt": self.attempt, "phase": "running", "manual": self.manual}
            if not self.manual:
                s.cursor = max(s.cursor, self.slot)

    class FiringFinished(DomainEvent):
        slot: str
        attempt: int
        ok: bool
        kind: str
        final: bool
        action: str
        invocation_ids: list
        error: dict | None
        notice: dict | None

        def apply(self, s: Schedule) -> None:
            manual = bool(s.open and s.open.get("manual"))
            if not self.final:
                s.open = {"slot": self.slot, "attempt": self.attempt, "phase": "retry", "manual": manual}
                return
            s.open = None
            if manual:
                return
            s.fired += 1
            s.consecutive_failures = 0 if self.ok else s.consecutive_failures + 1

    class FiringSkipped(DomainEvent):
        first: str
        last: str
        missed: int
        reason: str

        def apply(self, s: Schedule) -> None:
            s.cursor = max(s.cursor, self.last)

    class ScheduleCompleted(DomainEvent):
        reason: str

        def apply(self, s: Schedule) -> None:
            s.status = COMPLETED

    class ScheduleCancelled(DomainEvent):
        reason: str
        by: str

        def apply(self, s: Schedule) -> None:
            s.status = CANCELLED

    def __init__(
        self, target: dict, args: dict, cron: str, timezone: str, channel: str, count: int | None,
        expiry: str | None, on_failure: str, max_consecutive_failures: int | None, paused: bool,
        grace_s: int, label: str, owner: str, since: str, actor: str = "host",
    ) -> None:
        self.target = target
        self.args = args
        self.cron = cron
        self.timezone = timezone
        self.channel = channel
        self.count = count
        self.expiry = expiry
        self.on_failure = on_failure
        self.max_consecutive_failures = max_consecutive_failures
        self.grace_s = grace_s
        self.label = label
        self.owner = owner
        self.actor = actor
        self.status = PAUSED if paused else ACTIVE
        # A schedule created after a slot does not fire for it.
        self.cursor = since
        self.fired = 0
        self.consecutive_failures = 0
        self.open: dict[str, Any] | None = None
        self.approval: dict[str, Any] | None = None
        self.confirmed_by: str | None = None

    @classmethod
    def create(cls, *, id: Any, at: Any, since: str, **fields: Any) -> Schedule:  # noqa: A002
        check_fields(fields)
        return cls._create(cls.ScheduleCreated, id=id, timestamp=at, since=since, **fields)

    @property
    def closed(self) -> bool:
        return self.status in (COMPLETED, CANCELLED)

    def approve(self, *, template: str, executors: list, by: str, turn_id: str | None, reason: str, at: Any) -> None:
        if self.closed:
            raise ScheduleError(f"the schedule is {self.status}; there is nothing to approve")
        self.trigger_event(self.ScheduleApproved, template=template, executors=list(executors), by=by,
                           turn_id=turn_id, reason=reason, timestamp=at)

    def confirm(self, *, by: str, next_fires: list, at: Any) -> None:
        self.trigger_event(self.ScheduleConfirmed, by=by, cron=self.cron, next_fires=list(next_fires), timestamp=at)

    def pause(self, *, by: str, at: Any) -> None:
        if self.status != ACTIVE:
            raise ScheduleError(f"the schedule is {self.status}; only an active schedule can be paused")
        self.trigger_event(self.SchedulePaused, by=by, timestamp=at)

    def resume(self, *, by: str, since: str, at: Any) -> None:
        if self.status != PAUSED:
            raise ScheduleError(f"the schedule is {self.status}; only a paused schedule can be resumed")
        self.trigger_event(self.ScheduleResumed, by=by, since=since, timestamp=at)

    def modify(self, *, changes: dict, by: str, since: str, at: Any) -> None:
        if self.closed:
            raise ScheduleError(f"the schedule is {self.status}; it cannot be changed")
        allowed = {"target", "args", "cron", "timezone", "channel", "count", "expiry", "on_failure", "max_consecutive_failures", "grace_s", "label"}
        if "target" in changes and self.owner == "builtin":
            raise ScheduleError("a builtin job keeps its target; pause or change its cadence instead")
        unknown = sorted(set(changes) - allowed)
        if unknown:
            raise ScheduleError(f"cannot change {', '.join(unknown)}; changeable: {', '.join(sorted(allowed))}")
        merged = {k: getattr(self, k) for k in allowed} | changes
        check_fields({**merged, "paused": False, "owner": self.owner})
        if changes:
            self.trigger_event(self.ScheduleModified, changes=changes, by=by, since=since, timestamp=at)

    def start_firing(self, *, slot: str, attempt: int, recovery: bool = False, manual: bool = False, at: Any) -> None:
        if self.closed:
            raise ScheduleError(f"the schedule is {self.status}; it does not fire")
        if self.open is not None:
            same = self.open["slot"] == slot and attempt == self.open["attempt"] + 1
            if not (same and (self.open["phase"] == "retry" or recovery)):
                raise ScheduleError(f"slot {self.open['slot']} is still open (attempt {self.open['attempt']})")
        elif attempt != 1:
            raise ScheduleError("a new slot starts at attempt 1")
        elif not manual and slot <= self.cursor:
            # The idempotency rule: a slot at or before the cursor was served or passed.
            raise ScheduleError(f"slot {slot} is not after the cursor {self.cursor}; it was served or passed already")
        if attempt > MAX_ATTEMPTS:
            raise ScheduleError(f"a slot has at most {MAX_ATTEMPTS} attempts")
        self.trigger_event(self.FiringStarted, slot=slot, attempt=attempt, recovery=recovery, manual=manual, timestamp=at)

    def finish_firing(
        self, *, slot: str, attempt: int, ok: bool, kind: str, final: bool, action: str,
        invocation_ids: list, at: Any, error: dict | None = None, notice: dict | None = None,
    ) -> None:
        if self.open is None or self.open["slot"] != slot or self.open["attempt"] != attempt or self.open["phase"] != "running":
            raise ScheduleError(f"no running attempt {attempt} for slot {slot}")
        if not final and attempt >= MAX_ATTEMPTS:
            raise ScheduleError(f"attempt {attempt} is the last one; it must be final")
        self.trigger_event(
            self.FiringFinished, slot=slot, attempt=attempt, ok=ok, kind=kind, final=final, action=action,
            invocation_ids=invocation_ids, error=error, notice=notice, timestamp=at,
        )

    def skip(self, *, first: str, last: str, missed: int, reason: str, at: Any) -> None:
        if last <= self.cursor:
            return
        self.trigger_event(self.FiringSkipped, first=first, last=last, missed=missed, reason=reason, timestamp=at)

    def complete(self, *, reason: str, at: Any) -> None:
        if self.closed:
            return
        if self.open is not None:
            raise ScheduleError("a firing is still open")
        self.trigger_event(self.ScheduleCompleted, reason=reason, timestamp=at)

    def cancel(self, *, reason: str, by: str, at: Any) -> None:
        if self.closed:
            raise ScheduleError(f"the schedule is already {self.status}")
        self.trigger_event(self.ScheduleCancelled, reason=reason, by=by, timestamp=at)


def check_fields(f: dict[str, Any]) -> None:
    """The checks that need no clock and no cron parser (those live in the scheduler)."""
    target = f.get("target")
    if not isinstance(target, dict) or target.get("kind") not in TARGET_KINDS:
        raise ScheduleError(f"target must be an object with kind one of {', '.join(TARGET_KINDS)}")
    if target["kind"] == "executor" and not (isinstance(target.get("name"), str) and target["name"]):
        raise ScheduleError("an executor target needs a name")
    if target["kind"] == "callback" and not (isinstance(target.get("key"), str) and target["key"]):
        raise ScheduleError("a callback target needs a key")
    if target["kind"] == "chain":
        steps = target.get("steps")
        if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) and isinstance(s.get("executor"), str) and isinstance(s.get("args", {}), dict) for s in steps):
            raise ScheduleError("a chain target needs steps: a non-empty list of {executor, args}")
    if not isinstance(f.get("args"), dict):
        raise ScheduleError("args must be an object")
    if f.get("channel") not in CHANNELS:
        raise ScheduleError(f"channel must be one of {', '.join(CHANNELS)}, got {f.get('channel')!r}")
    if f.get("on_failure") not in ON_FAILURE:
        raise ScheduleError(f"on_failure must be one of {', '.join(ON_FAILURE)}, got {f.get('on_failure')!r}")
    for key, low in (("count", 1), ("max_consecutive_failures", 1)):
        value = f.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ScheduleError(f"{key} must be an integer >= {low} or null, got {value!r}")
    grace = f.get("grace_s")
    if isinstance(grace, bool) or not isinstance(grace, int) or grace < 0:
        raise ScheduleError(f"grace_s must be a non-negative integer, got {grace!r}")
    if f.get("owner") not in ("user", "builtin"):
        raise ScheduleError("owner must be user or builtin")
