"""The due computation: cron slots after a cursor, grace window, expiry, time zones."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from domain.due import BadSchedule, check_cron, due, next_slot, parse, stamp, wake_at

UTC = timezone.utc


def t(h: int, m: int = 0, s: int = 0, day: int = 1) -> datetime:
    return datetime(2026, 5, day, h, m, s, tzinfo=UTC)


def test_stamp_is_fixed_width_and_orders_as_text() -> None:
    a, b = stamp(t(8)), stamp(t(8, 0, 0) + timedelta(microseconds=5))
    assert a == "2026-05-01T08:00:00.000000+00:00"
    assert len(a) == len(b) and a < b
    assert stamp(datetime(2026, 5, 1, 10, tzinfo=timezone(timedelta(hours=2)))) == a.replace("08", "08")
    with pytest.raises(BadSchedule):
        stamp(datetime(2026, 5, 1))


def test_cadence_every_five_minutes() -> None:
    d = due("*/5 * * * *", "UTC", stamp(t(7, 58, 30)), t(8, 11), grace_s=3600)
    assert d.fire == [stamp(t(8, 0)), stamp(t(8, 5)), stamp(t(8, 10))]
    assert d.skipped is None and not d.expired


def test_slot_equal_to_now_is_due_and_slot_at_cursor_is_not() -> None:
    assert due("*/5 * * * *", "UTC", stamp(t(7, 59)), t(8, 0), grace_s=60).fire == [stamp(t(8, 0))]
    # The cursor is the last slot served: it is never owed again.
    assert due("*/5 * * * *", "UTC", stamp(t(8, 0)), t(8, 4, 59), grace_s=600).fire == []


def test_created_after_its_slot_does_not_fire_for_it() -> None:
    # Created at 08:00:30, a tick at 08:01 owes nothing for 08:00.
    assert due("*/5 * * * *", "UTC", stamp(t(8, 0, 30)), t(8, 1), grace_s=3600).fire == []
    assert next_slot("*/5 * * * *", "UTC", stamp(t(8, 0, 30))) == stamp(t(8, 5))


def test_missed_slots_inside_grace_fire_older_ones_are_passed_over_once() -> None:
    d = due("*/5 * * * *", "UTC", stamp(t(7, 0)), t(8, 1), grace_s=15 * 60)
    assert d.fire == [stamp(t(7, 50)), stamp(t(7, 55)), stamp(t(8, 0))]
    first, last, missed = d.skipped
    assert (first, last, missed) == (stamp(t(7, 5)), stamp(t(7, 45)), 9)


def test_expiry_bounds_the_slots_and_closes() -> None:
    d = due("*/5 * * * *", "UTC", stamp(t(7, 59)), t(8, 30), grace_s=3600, expiry=stamp(t(8, 10)))
    # A slot at the expiry itself does not fire.
    assert d.fire == [stamp(t(8, 0)), stamp(t(8, 5))]
    assert d.expired
    early = due("*/5 * * * *", "UTC", stamp(t(7, 59)), t(8, 1), grace_s=3600, expiry=stamp(t(8, 30)))
    assert early.fire == [stamp(t(8, 0))] and not early.expired
    # Nothing left before the expiry: closed even before the expiry comes.
    last = due("*/5 * * * *", "UTC", stamp(t(7, 59)), t(8, 1), grace_s=3600, expiry=stamp(t(8, 3)))
    assert last.fire == [stamp(t(8, 0))] and last.expired


def test_time_zone_of_the_cron() -> None:
    # 08:00 in Rome in May is 06:00 UTC (daylight saving time).
    assert next_slot("0 8 * * *", "Europe/Rome", stamp(t(0))) == stamp(t(6))
    assert next_slot("0 8 * * *", "UTC", stamp(t(0))) == stamp(t(8))


def test_wake_is_the_sooner_of_next_slot_and_expiry() -> None:
    assert wake_at("0 8 * * *", "UTC", stamp(t(0)), None) == stamp(t(8))
    assert wake_at("0 8 * * *", "UTC", stamp(t(0)), stamp(t(7))) == stamp(t(7))


@pytest.mark.parametrize("bad", ["", "every day", "61 * * * *", "* * *"])
def test_bad_cron_is_refused(bad: str) -> None:
    with pytest.raises(BadSchedule):
        check_cron(bad)


def test_bad_zone_and_timestamp_are_refused() -> None:
    with pytest.raises(BadSchedule, match="time zone"):
        next_slot("* * * * *", "Mars/Olympus", stamp(t(0)))
    with pytest.raises(BadSchedule, match="no time zone"):
        parse("2026-05-01T08:00:00")
    with pytest.raises(BadSchedule, match="ISO"):
        parse("tomorrow")
