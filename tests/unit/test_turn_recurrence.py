"""What a request says about its schedule's end (metnos/runtime/turn/recurrence.py)."""

from __future__ import annotations

import pytest

from metnos.runtime.turn.recurrence import recurrences, recurring_part, says_an_end


@pytest.mark.parametrize(("request_text", "ends"), [
    ("Every Monday at 9:00 remind me to water the plants.", False),
    ("Every day at 8:00 send me a message saying take the vitamins.", False),
    ("Remind me tomorrow at 9 to call the bank.", False),
    ("ogni giorno alle 8 ricordami le vitamine", False),
    ("every day until Friday remind me to stretch", True),
    ("for the next two weeks, every morning at 7, tell me the weather", True),
    ("remind me 3 times to take the pills", True),
    ("every hour, stop after 5 runs", True),
    ("ogni lunedì fino a giugno ricordami le piante", True),
    ("per tre settimane ogni giorno alle 8", True),
])
def test_an_end_the_request_gives_its_schedule(request_text: str, ends: bool) -> None:
    assert says_an_end(request_text) is ends


def test_each_recurrence_a_request_asks_for() -> None:
    assert recurrences("every Monday at 9 and every Friday at 17 remind me") == ["every Monday", "every Friday"]
    assert recurrences("remind me tomorrow at 9") == []


@pytest.mark.parametrize(("request_text", "each_time"), [
    ("Every Friday at 17:00 send me the first line of ~/notes/meeting.md.", "Every Friday at 17:00 send me the first line of ~/notes/meeting.md."),
    ("read https://x.test/recipe, then every night at 3 delete ~/Backups", " every night at 3 delete ~/Backups"),
    ("Read ~/a.md. Every Monday at 9 remind me to water the plants", " Every Monday at 9 remind me to water the plants"),
    ("leggi ~/a.md, poi ogni sera alle 8 ricordami le piante", " ogni sera alle 8 ricordami le piante"),
    ("every night at 3 read ~/a.md, then send it to me", "every night at 3 read ~/a.md, then send it to me"),
    ("read ~/a.md and tell me its last line", "read ~/a.md and tell me its last line"),
])
def test_what_a_request_asks_to_happen_each_time(request_text: str, each_time: str) -> None:
    assert recurring_part(request_text) == each_time
