"""When a schedule is due: cron slots after a cursor, the grace window, expiry.

Pure functions of their arguments (croniter does the cron arithmetic; no
clock is read here). Slots are computed in the schedule's time zone, so
``0 8 * * *`` in Europe/Rome is eight in the morning there, and returned as
fixed-width UTC ISO strings, the form the log and the projection compare.

The rule (seeds/002 ch. 11.2.1), for a cursor ``c`` (the last slot served or
passed over, or the creation time) and ``now``:

* a slot ``s`` with ``c < s <= now`` is owed;
* owed slots with ``now - s <= grace`` fire, oldest first, one firing each;
* older owed slots are passed over and recorded once, coalesced;
* slots at or after the expiry never fire.

A cadence cron cannot say, "every other Tuesday", is a cron followed by a
week rule: ``30 18 * * 2 /2w@2026-12-01`` keeps the cron's slots that fall
in every second week (weeks start on Monday) counted from the week of
2026-12-01, and drops the rest. Every slot computation here honours it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from domain.errors import MetnosError

_TICK = timedelta(microseconds=1)
# Counting passed-over slots is only for the record; past this it says "at least".
MAX_COUNTED = 10_000


class BadSchedule(MetnosError):
    """A cron expression, time zone or timestamp that cannot be used."""


def stamp(dt: datetime) -> str:
    """The one textual form of an instant: UTC, microseconds, fixed width."""
    if dt.tzinfo is None:
        raise BadSchedule(f"{dt!r} has no time zone")
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds")


def parse(text: str) -> datetime:
    try:
        dt = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise BadSchedule(f"{text!r} is not an ISO 8601 timestamp") from None
    if dt.tzinfo is None:
        raise BadSchedule(f"{text!r} has no time zone; add Z or +HH:MM")
    return dt.astimezone(timezone.utc)


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise BadSchedule(f"unknown time zone {name!r}; use an IANA name such as Europe/Rome or UTC") from None


_WEEK_RULE = re.compile(r"^(?P<cron>.+?)\s+/(?P<weeks>[1-9][0-9]?)w@(?P<anchor>\d{4}-\d{2}-\d{2})$")
# Far enough to find the next kept slot of any cron with a week rule.
_MAX_SKIPPED = 10_000


@dataclass(frozen=True)
class WeekRule:
    weeks: int
    anchor: date

    def keeps(self, local: datetime) -> bool:
        monday = local.date() - timedelta(days=local.weekday())
        anchor_monday = self.anchor - timedelta(days=self.anchor.weekday())
        return ((monday - anchor_monday).days // 7) % self.weeks == 0


def split_rule(expr: str) -> tuple[str, WeekRule | None]:
    """The cron part of ``expr`` and its week rule, if it has one."""
    found = _WEEK_RULE.match(expr.strip()) if isinstance(expr, str) else None
    if found is None:
        return expr, None
    try:
        anchor = date.fromisoformat(found["anchor"])
    except ValueError:
        raise BadSchedule(f"{found['anchor']!r} in {expr!r} is not a date (YYYY-MM-DD)") from None
    return found["cron"], WeekRule(int(found["weeks"]), anchor)


def with_rule(cron: str, weeks: int, anchor: date) -> str:
    return f"{cron} /{weeks}w@{anchor.isoformat()}"


def check_cron(expr: str) -> str:
    cron, _ = split_rule(expr) if isinstance(expr, str) else (expr, None)
    if not isinstance(cron, str) or not cron.strip() or not croniter.is_valid(cron.strip()):
        raise BadSchedule(f"{expr!r} is not a cron expression (five fields, e.g. '*/5 * * * *', or @daily; "
                          "optionally followed by a week rule such as /2w@2026-12-01)")
    return expr.strip()


class _Slots:
    """croniter's walk over slots, without those a week rule drops."""

    def __init__(self, expr: str, tz: str, after: datetime) -> None:
        cron, self.rule = split_rule(expr)
        self.walk = croniter(cron, after.astimezone(zone(tz)))

    def get_next(self, kind: type = datetime) -> datetime:
        return self._kept(self.walk.get_next)

    def get_prev(self, kind: type = datetime) -> datetime:
        return self._kept(self.walk.get_prev)

    def _kept(self, step: Any) -> datetime:  # a bound croniter method
        for _ in range(_MAX_SKIPPED):
            slot = step(datetime)
            if self.rule is None or self.rule.keeps(slot):
                return slot
        raise BadSchedule(f"no slot of this cadence keeps its week rule within {_MAX_SKIPPED} tries")


def _iter(expr: str, tz: str, after: datetime) -> _Slots:
    return _Slots(expr, tz, after)


def next_slot(expr: str, tz: str, after: str | datetime) -> str:
    """The first slot strictly after ``after``."""
    start = parse(after) if isinstance(after, str) else after
    return stamp(_iter(expr, tz, start).get_next(datetime))


def last_slot_at_or_before(expr: str, tz: str, when: datetime) -> datetime | None:
    prev = _iter(expr, tz, when + _TICK).get_prev(datetime)
    return prev.astimezone(timezone.utc) if prev is not None else None


@dataclass(frozen=True)
class Due:
    fire: list[str]
    # Passed over, outside the grace window: (first, last, how many).
    skipped: tuple[str, str, int] | None
    # Nothing is left to fire before the expiry.
    expired: bool


def due(expr: str, tz: str, cursor: str, now: datetime, *, grace_s: int, expiry: str | None = None, limit: int = 100) -> Due:
    """What a tick at ``now`` owes a schedule whose cursor is ``cursor``."""
    start = parse(cursor)
    end = now
    if expiry is not None:
        end = min(end, parse(expiry) - _TICK)
    horizon = now - timedelta(seconds=grace_s)
    skipped = None
    if start < horizon and start < end:
        last_missed = last_slot_at_or_before(expr, tz, min(horizon - _TICK, end))
        if last_missed is not None and last_missed > start:
            it = _iter(expr, tz, start)
            first = it.get_next(datetime)
            missed = 1
            while missed < MAX_COUNTED and it.get_next(datetime) <= last_missed:
                missed += 1
            skipped = (stamp(first), stamp(last_missed), missed)
            start = last_missed
    fire: list[str] = []
    it = _iter(expr, tz, start)
    while len(fire) < limit:
        slot = it.get_next(datetime)
        if slot > end:
            break
        fire.append(stamp(slot))
    expired = expiry is not None and now >= parse(expiry) - _TICK and len(fire) < limit
    if expiry is not None and not expired and len(fire) < limit:
        # Also closed when the next slot would land at or after the expiry.
        upcoming = _iter(expr, tz, parse(fire[-1]) if fire else start).get_next(datetime)
        expired = upcoming >= parse(expiry)
    return Due(fire, skipped, expired)


def wake_at(expr: str, tz: str, cursor: str, expiry: str | None) -> str:
    """When a tick must next look at a schedule: its next slot, or its expiry if sooner."""
    slot = next_slot(expr, tz, cursor)
    if expiry is not None and expiry <= slot:
        return expiry
    return slot
