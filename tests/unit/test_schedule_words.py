"""Schedules in words (seeds/000 ch. 11): English and Italian read into a cron
or a one-shot, and the week rule that says "every other Tuesday"."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from domain.due import BadSchedule, check_cron, due, next_slot, stamp
from domain.schedule_words import WordsNotUnderstood, next_times, parse_words

UTC = timezone.utc
# Saturday 28 November 2026, 16:20 UTC (17:20 in Rome).
NOW = datetime(2026, 11, 28, 16, 20, 30, tzinfo=UTC)


def read(words: str, tz: str = "Europe/Rome") -> tuple[str, int | None]:
    cadence = parse_words(words, timezone=tz, now=NOW)
    return cadence.cron, cadence.count


@pytest.mark.parametrize(("words", "cron"), [
    ("every morning at 8", "0 8 * * *"),
    ("ogni mattina alle 8", "0 8 * * *"),
    ("every evening at 7", "0 19 * * *"),
    ("ogni sera alle 7", "0 19 * * *"),
    ("every Friday at 5pm", "0 17 * * 5"),
    ("ogni lunedì alle 9:15", "15 9 * * 1"),
    ("on tuesdays at 10", "0 10 * * 2"),
    ("every weekday at 7:45", "45 7 * * 1-5"),
    ("nei giorni feriali alle 8", "0 8 * * 1-5"),
    ("on the first of each month", "0 9 1 * *"),
    ("il primo di ogni mese", "0 9 1 * *"),
    ("the 15th of every month at 10", "0 10 15 * *"),
    ("il 15 di ogni mese alle 10", "0 10 15 * *"),
    ("every 15 minutes", "*/15 * * * *"),
    ("ogni 2 ore", "0 */2 * * *"),
    ("every hour", "0 * * * *"),
])
def test_recurring_words_become_a_cron(words: str, cron: str) -> None:
    assert read(words) == (cron, None)


@pytest.mark.parametrize("words", ["every other Tuesday at 18:30", "every second tuesday at 18:30",
                                   "un martedì sì e uno no alle 18:30", "martedì alterni alle 18:30",
                                   "ogni due martedì alle 18:30"])
def test_every_other_tuesday_is_a_cron_with_a_week_rule(words: str) -> None:
    cron, count = read(words)
    # The first Tuesday after now (1 December) anchors the rule.
    assert (cron, count) == ("30 18 * * 2 /2w@2026-12-01", None)
    assert next_times(cron, "Europe/Rome", NOW) == [
        stamp(datetime(2026, 12, d, 17, 30, tzinfo=UTC)) for d in (1, 15, 29)]


@pytest.mark.parametrize(("words", "fires_at"), [
    ("tomorrow at 9", datetime(2026, 11, 29, 8, 0, tzinfo=UTC)),
    ("domani alle 9", datetime(2026, 11, 29, 8, 0, tzinfo=UTC)),
    ("domani a mezzogiorno", datetime(2026, 11, 29, 11, 0, tzinfo=UTC)),
    ("in two hours", datetime(2026, 11, 28, 18, 20, tzinfo=UTC)),
    ("tra due ore", datetime(2026, 11, 28, 18, 20, tzinfo=UTC)),
    ("fra 30 minuti", datetime(2026, 11, 28, 16, 50, tzinfo=UTC)),
    ("venerdì alle 10", datetime(2026, 12, 4, 9, 0, tzinfo=UTC)),
    ("on 3 December at 14:00", datetime(2026, 12, 3, 13, 0, tzinfo=UTC)),
    ("il 5 gennaio alle 8", datetime(2027, 1, 5, 7, 0, tzinfo=UTC)),
])
def test_one_shot_words_become_one_firing(words: str, fires_at: datetime) -> None:
    cron, count = read(words)
    assert count == 1
    assert next_times(cron, "Europe/Rome", NOW, count=count) == [stamp(fires_at)]


def test_words_that_are_no_schedule_are_refused_with_the_shapes_known() -> None:
    with pytest.raises(WordsNotUnderstood, match="every morning at 8.*or give a five-field cron"):
        read("purple monkey dishwasher")
    with pytest.raises(WordsNotUnderstood, match="not a time of day"):
        read("every day at 25")


def test_the_next_three_firings_are_in_the_schedule_zone() -> None:
    assert next_times("0 8 * * *", "Europe/Rome", NOW) == [
        stamp(datetime(2026, 11, d, 7, 0, tzinfo=UTC)) for d in (29, 30)] + [stamp(datetime(2026, 12, 1, 7, 0, tzinfo=UTC))]


def test_the_week_rule_drops_off_weeks_in_due_and_keeps_grace() -> None:
    expr = "30 18 * * 2 /2w@2026-12-01"
    check_cron(expr)
    with pytest.raises(BadSchedule, match="not a cron expression"):
        check_cron("30 18 * * 2 /2w@soon")
    # The off week (8 December) owes nothing; the on week (15 December) fires.
    cursor = stamp(datetime(2026, 12, 1, 18, 0, tzinfo=UTC))
    assert due(expr, "Europe/Rome", cursor, datetime(2026, 12, 8, 18, 0, tzinfo=UTC), grace_s=900).fire == []
    on = datetime(2026, 12, 15, 17, 30, tzinfo=UTC)
    assert due(expr, "Europe/Rome", cursor, on + timedelta(minutes=5), grace_s=900).fire == [stamp(on)]
    # Missed beyond the grace window: passed over once, counted in kept slots only.
    late = due(expr, "Europe/Rome", cursor, datetime(2027, 1, 13, 9, 0, tzinfo=UTC), grace_s=900)
    # 15 and 29 December, 12 January: the three kept Tuesdays, not the six of a weekly cron.
    assert late.fire == [] and late.skipped == (stamp(on), stamp(datetime(2027, 1, 12, 17, 30, tzinfo=UTC)), 3)
    assert next_slot(expr, "Europe/Rome", stamp(on)) == stamp(datetime(2026, 12, 29, 17, 30, tzinfo=UTC))
