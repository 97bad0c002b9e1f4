"""The agent benchmark's checks on side effects: what was asked once is done once (no model is run)."""

from __future__ import annotations

from pathlib import Path

from bench.agent_suite import TASKS, Outcome, build_home

BY_ID = {t.id: t for t in TASKS}


def test_a_reminder_made_twice_is_not_the_reminder_asked_for(tmp_path: Path) -> None:
    check = BY_ID["weekly_reminder"].check
    one = {"cron": "0 9 * * 1", "label": "water the plants", "target": {"name": "get_now"}}
    assert check(Outcome(answer="", home=tmp_path, outbox=[], schedules=[one])) == (True, "ok")
    ok, why = check(Outcome(answer="", home=tmp_path, outbox=[], schedules=[one, dict(one)]))
    assert not ok and "1 more" in why, why
    assert not check(Outcome(answer="", home=tmp_path, outbox=[], schedules=[{**one, "cron": "0 9 * * 2"}]))[0]


def test_an_append_adds_to_the_end_and_repeats_nothing(tmp_path: Path) -> None:
    task = BY_ID["append_shopping"]
    build_home(task, tmp_path)
    shopping = tmp_path / "notes" / "shopping.md"
    before = shopping.read_text()

    def check(text: str) -> tuple[bool, str]:
        shopping.write_text(text)
        return task.check(Outcome(answer="", home=tmp_path, outbox=[], schedules=[]))

    assert check(before + "- coffee\n") == (True, "ok")
    assert not check(before + before + "- coffee\n")[0], "the list written again after itself"
    assert not check("- coffee\n" + before)[0], "not at the end"
    assert not check(before)[0], "nothing added"
