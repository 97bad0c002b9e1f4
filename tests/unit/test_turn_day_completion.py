"""The day a request names, given to a read called without one (metnos/runtime/turn/completion.py)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from metnos.runtime.turn.completion import complete_day

READ_EVENTS = Path(__file__).resolve().parents[2] / "executors" / "read_events"
PROPERTIES = json.loads((READ_EVENTS / "schema.json").read_text())["definitions"]["Input"]["properties"]


@pytest.mark.parametrize("request_text, when", [
    ("Am I free on Thursday afternoon?", "Thursday afternoon"),
    ("what do I have tomorrow?", "tomorrow"),
    ("cosa ho giovedì pomeriggio?", "giovedì pomeriggio"),
    ("anything next friday?", "next friday"),
])
def test_a_read_without_a_day_is_given_the_one_the_request_names(request_text: str, when: str) -> None:
    assert complete_day({"calendar": "home"}, PROPERTIES, request_text) == ({"calendar": "home", "when": when}, {"when": when})


@pytest.mark.parametrize("args, request_text", [
    ({"when": "today"}, "Am I free on Thursday afternoon?"),          # the model gave a day: its own
    ({"start": "monday"}, "what do I have on Thursday?"),
    ({}, "what do I have from Monday to Friday?"),                     # two days: a range the model must give
    ({}, "what is on my calendar?"),                                   # no day named
])
def test_a_day_given_or_not_said_once_is_left_as_it_is(args: dict, request_text: str) -> None:
    assert complete_day(args, PROPERTIES, request_text) == (args, {})


def test_an_executor_that_takes_no_day_is_left_as_it_is() -> None:
    assert complete_day({}, {"paths": {"type": "array"}}, "read the thursday notes") == ({}, {})


def test_the_words_given_are_the_day_the_executor_reads() -> None:
    # On a Thursday, "Thursday afternoon" is next week's (the week read from today stops short of it).
    import importlib.util
    spec = importlib.util.spec_from_file_location("read_events_calendars", READ_EVENTS / "calendars.py")
    assert spec is not None and spec.loader is not None
    calendars = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(calendars)
    args, _ = complete_day({}, PROPERTIES, "Am I free on Thursday afternoon?")
    when = calendars.read_when(args["when"], {"now": "2026-12-03T12:00:00+00:00", "timezone": "UTC"})
    assert (when.kind, when.moment.isoformat(), when.until.isoformat()) == ("part", "2026-12-10T12:00:00+00:00", "2026-12-10T18:00:00+00:00")
