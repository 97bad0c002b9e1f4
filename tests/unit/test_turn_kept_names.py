"""A new name for a record that exists is taken only in the request's words (metnos/runtime/turn/completion.py)."""

from __future__ import annotations

import json
from pathlib import Path

from metnos.runtime.turn.completion import keep_names

# The executor's input schema as the loader hands it over: a reference into the document's definitions.
SCHEMA = {**json.loads((Path(__file__).resolve().parents[2] / "executors" / "set_events" / "schema.json").read_text()),
          "$ref": "#/definitions/Input"}


def test_a_title_that_restates_the_request_is_left_out_of_a_change() -> None:
    args = {"events": [{"find": "dentist", "when": "friday 10:00", "summary": "Move dentist appointment"}]}
    kept, dropped = keep_names(args, SCHEMA, "Move my dentist appointment to Friday at 10.")
    assert kept == {"events": [{"find": "dentist", "when": "friday 10:00"}]}
    assert dropped == ["events.0.summary"]


def test_a_new_title_in_the_requests_words_is_kept() -> None:
    args = {"events": [{"find": "dentist", "summary": "Dentist with Dr Rossi"}]}
    kept, dropped = keep_names(args, SCHEMA, 'rename my dentist appointment to "Dentist with Dr. Rossi"')
    assert kept == args and dropped == []


def test_a_new_event_keeps_the_title_the_model_gave_it() -> None:
    args = {"events": [{"summary": "Lunch with Marco", "when": "saturday 13:00"}]}
    assert keep_names(args, SCHEMA, "put lunch with marco on saturday at 1pm") == (args, [])
    args = {"events": [{"summary": "Team lunch", "when": "saturday 13:00"}]}
    assert keep_names(args, SCHEMA, "book a lunch for the team on saturday") == (args, [])
