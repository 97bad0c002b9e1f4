"""The atomic dialog's pure parts: which argument an answer fills, how it is read, and the daemon's broker."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from metnos.runtime.step.dialog_tools import GET_INPUTS, Question
from metnos.runtime.turn.rules.dialog import as_value, target_argument
from metnos.services.dialogs import DialogBroker, DialogUnknown, EmptyAnswer

EXECUTORS = Path(__file__).resolve().parents[2] / "executors"


def input_schema(name: str) -> dict:
    """As the loader hands it on: a reference into the executor's schema document."""
    document = json.loads((EXECUTORS / name / "schema.json").read_text())
    return {"$ref": "#/definitions/Input", "definitions": document["definitions"]}


@pytest.mark.parametrize(("executor", "expected"), [
    ("delete_files", ("paths", "list")),
    ("delete_events", ("uids", "list")),
    # A message is a recipient and a body, a file a path and a content: no one argument to fill.
    ("send_messages", None),
    ("write_files", None),
])
def test_the_argument_an_answer_fills(executor: str, expected: tuple[str, str] | None) -> None:
    assert target_argument(input_schema(executor)) == expected


def test_a_path_argument_is_filled_as_text() -> None:
    schema = {"type": "object", "properties": {"from_step": {"type": "integer"}, "file": {"type": "string", "format": "path"}}}
    assert target_argument(schema) == ("file", "text")


def test_an_answer_read_as_a_list_and_as_a_text() -> None:
    assert as_value(" ~/a.txt, ~/b.txt;~/c d.txt\n", "list") == ["~/a.txt", "~/b.txt", "~/c d.txt"]
    assert as_value(" ~/a, b.txt ", "text") == "~/a, b.txt"


QUESTION = Question(step=2, tool=GET_INPUTS, question="Which files should I delete?", channel="http",
                    executor="delete_files", argument="paths")


def _ask_in_a_thread(broker: DialogBroker, got: list) -> threading.Thread:
    asking = threading.Thread(target=lambda: got.append(broker.asker("http")(QUESTION)))
    asking.start()
    deadline = time.monotonic() + 10
    while not broker.pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    return asking


def test_the_broker_holds_a_question_until_it_is_answered_once() -> None:
    broker, got = DialogBroker(timeout_s=30), []
    asking = _ask_in_a_thread(broker, got)
    [pending] = broker.pending()
    assert {k: pending[k] for k in ("step", "tool", "question", "channel", "executor", "argument")} == QUESTION.to_json()
    with pytest.raises(EmptyAnswer):
        broker.answer(pending["id"], "   ", by="user")
    assert broker.answer(pending["id"], " ~/old.txt ", by="user") == {"id": pending["id"], "answered": True}
    asking.join(10)
    assert got == [("~/old.txt", "http:user")] and broker.pending() == []
    with pytest.raises(DialogUnknown):
        broker.answer(pending["id"], "again", by="user")


def test_an_unanswered_question_times_out_and_a_stop_leaves_it_unanswered() -> None:
    broker, got = DialogBroker(timeout_s=0.2), []
    _ask_in_a_thread(broker, got).join(10)
    assert got == [(None, "http:timeout")]
    broker, got = DialogBroker(timeout_s=30), []
    asking = _ask_in_a_thread(broker, got)
    assert broker.stop_all("daemon-stopping") == 1
    asking.join(10)
    assert got == [(None, "http:daemon-stopping")]
