"""The Schedule aggregate's rules, and the schedule store folded from its events."""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import UUID

import pytest

from domain.base import ClockNotInjected
from domain.schedule import Schedule, ScheduleError
from domain.due import stamp
from projections.schedules import SchedulesFold, due_ids

UTC = timezone.utc


def at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 5, 1, h, m, tzinfo=UTC)


def new(n: int = 1, **kw) -> Schedule:
    fields = {"target": {"kind": "executor", "name": "get_now"}, "args": {}, "cron": "*/5 * * * *", "timezone": "UTC",
              "channel": "none", "count": None, "expiry": None, "on_failure": "notify", "max_consecutive_failures": 3,
              "paused": False, "grace_s": 900, "label": "", "owner": "user"} | kw
    return Schedule.create(id=UUID(int=n), at=at(7, 58), since=stamp(at(7, 58)), **fields)


def test_a_slot_is_taken_once() -> None:
    s = new()
    s.start_firing(slot=stamp(at(8)), attempt=1, at=at(8))
    with pytest.raises(ScheduleError, match="still open"):
        s.start_firing(slot=stamp(at(8)), attempt=1, at=at(8))
    s.finish_firing(slot=stamp(at(8)), attempt=1, ok=True, kind="ok", final=True, action="none", invocation_ids=[], at=at(8))
    with pytest.raises(ScheduleError, match="not after the cursor"):
        s.start_firing(slot=stamp(at(8)), attempt=1, at=at(8, 1))
    with pytest.raises(ScheduleError, match="not after the cursor"):
        s.start_firing(slot=stamp(at(7, 55)), attempt=1, at=at(8, 1))
    assert s.fired == 1 and s.open is None


def test_retry_keeps_the_slot_open_and_counts_once() -> None:
    s = new()
    slot = stamp(at(8))
    s.start_firing(slot=slot, attempt=1, at=at(8))
    s.finish_firing(slot=slot, attempt=1, ok=False, kind="Network", final=False, action="retry", invocation_ids=[], at=at(8))
    assert s.open["phase"] == "retry"
    with pytest.raises(ScheduleError):
        s.start_firing(slot=stamp(at(8, 5)), attempt=1, at=at(8))
    s.start_firing(slot=slot, attempt=2, at=at(8))
    with pytest.raises(ScheduleError, match="last one"):
        s.finish_firing(slot=slot, attempt=2, ok=False, kind="Network", final=False, action="retry", invocation_ids=[], at=at(8))
    s.finish_firing(slot=slot, attempt=2, ok=False, kind="Network", final=True, action="notify", invocation_ids=[], at=at(8))
    assert (s.fired, s.consecutive_failures, s.open) == (1, 1, None)


def test_a_running_attempt_is_only_restarted_as_a_recovery() -> None:
    s = new()
    slot = stamp(at(8))
    s.start_firing(slot=slot, attempt=1, at=at(8))
    with pytest.raises(ScheduleError):
        s.start_firing(slot=slot, attempt=2, at=at(8))
    with pytest.raises(ScheduleError, match="no running attempt"):
        s.finish_firing(slot=slot, attempt=2, ok=True, kind="ok", final=True, action="none", invocation_ids=[], at=at(8))


def test_lifecycle() -> None:
    s = new()
    with pytest.raises(ScheduleError):
        s.resume(by="user", since=stamp(at(8)), at=at(8))
    s.pause(by="user", at=at(8))
    s.resume(by="user", since=stamp(at(9)), at=at(9))
    # Slots that fell while paused are not owed.
    assert s.cursor == stamp(at(9))
    s.cancel(reason="done", by="user", at=at(9))
    for command in (lambda: s.pause(by="u", at=at(9)), lambda: s.cancel(reason="x", by="u", at=at(9)),
                    lambda: s.start_firing(slot=stamp(at(10)), attempt=1, at=at(10))):
        with pytest.raises(ScheduleError):
            command()


@pytest.mark.parametrize(("field", "value"), [
    ("channel", "pigeon"), ("on_failure", "explode"), ("count", 0), ("count", True), ("grace_s", -1),
    ("target", {"kind": "executor"}), ("target", {"kind": "chain", "steps": []}), ("args", []),
])
def test_bad_fields_are_refused(field: str, value: object) -> None:
    with pytest.raises(ScheduleError):
        new(**{field: value})


def test_events_need_a_timestamp_from_the_caller() -> None:
    s = new()
    with pytest.raises(ClockNotInjected):
        s.trigger_event(Schedule.SchedulePaused, by="user")


def fold_all(*schedules: Schedule) -> dict:
    fold = SchedulesFold()
    state = fold.initial()
    events = [e for s in schedules for e in s.collect_events()]
    for n, e in enumerate(sorted(events, key=lambda e: e.timestamp), start=1):
        fold.apply(state, e, n)
    return state


def test_the_store_mirrors_the_aggregate_and_indexes_next_fire() -> None:
    a, b, c = new(1), new(2, cron="0 9 * * *"), new(3, count=1)
    slot = stamp(at(8))
    c.start_firing(slot=slot, attempt=1, at=at(8))
    c.finish_firing(slot=slot, attempt=1, ok=True, kind="ok", final=True, action="none", invocation_ids=[], at=at(8))
    c.complete(reason="count", at=at(8))
    b.pause(by="user", at=at(8))
    state = fold_all(a, b, c)
    rows = state["schedules"]
    assert rows[str(a.id)]["next_fire"] == stamp(at(8))
    assert rows[str(b.id)]["status"] == "paused" and rows[str(b.id)]["next_fire"] is None
    assert rows[str(c.id)]["status"] == "completed" and rows[str(c.id)]["fired"] == 1
    assert state["index"] == [[stamp(at(8)), str(a.id)]]
    assert due_ids(state, stamp(at(7, 59))) == []
    assert due_ids(state, stamp(at(8))) == [str(a.id)]


def test_an_open_firing_is_due_at_once() -> None:
    a = new(1, cron="0 9 * * *")
    a.start_firing(slot=stamp(at(9)), attempt=1, at=at(9))
    state = fold_all(a)
    assert due_ids(state, stamp(at(9))) == [str(a.id)]
    assert state["schedules"][str(a.id)]["open"]["phase"] == "running"
