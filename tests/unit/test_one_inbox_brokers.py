"""The one inbox's brokers: an approval and a question wait alike, the first answer counts, a second is told where it came from."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from metnos.runtime.step.dialog_tools import GET_INPUTS, Question
from metnos.services import inbox
from metnos.services.approvals import ApprovalAlreadyAnswered, ApprovalBroker, ApprovalUnknown
from metnos.services.dialogs import DialogAlreadyAnswered, DialogBroker, DialogUnknown
from metnos.services.pending import AlreadyAnswered, PendingUnknown

QUESTION = Question(step=1, tool=GET_INPUTS, question="Which files should I delete?", channel="telegram",
                    executor="delete_files", argument="paths")


def waiting(broker: Any, ask: Any) -> tuple[threading.Thread, list[Any]]:
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(ask()))
    thread.start()
    deadline = time.monotonic() + 10
    while not broker.pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    return thread, got


def test_an_approval_asked_on_one_way_in_is_answered_on_another_and_a_second_answer_is_told_where() -> None:
    broker = ApprovalBroker(timeout_s=30)
    thread, got = waiting(broker, lambda: broker.ask("telegram", 2, "write_files", {"files": []}, "it writes", request="write milk"))
    [pending] = broker.pending()
    assert (pending["channel"], pending["request"], pending["executor"]) == ("telegram", "write milk", "write_files")
    assert broker.answer(pending["id"], approved=True, by="user", channel="cli") == {"id": pending["id"], "approved": True, "by": "cli:user"}
    thread.join(10)
    assert got == [(True, "cli:user")]
    with pytest.raises(ApprovalAlreadyAnswered, match=r"already answered on cli \(cli:user\)"):
        broker.answer(pending["id"], approved=False, by="button", channel="telegram")
    with pytest.raises(ApprovalUnknown):
        broker.answer("never-asked", approved=True, by="user")


def test_a_question_is_answered_once_and_named_by_the_way_in_that_answered() -> None:
    broker = DialogBroker(timeout_s=30)
    thread, got = waiting(broker, lambda: broker.ask("telegram", QUESTION, request="delete the old file"))
    [pending] = broker.pending()
    assert pending["request"] == "delete the old file" and pending["channel"] == "telegram"
    broker.answer(pending["id"], " ~/old.txt ", by="user", channel="http")
    thread.join(10)
    # Who answered, not who asked.
    assert got == [("~/old.txt", "http:user")]
    with pytest.raises(DialogAlreadyAnswered, match=r"question '[0-9a-f]+' was already answered on http \(http:user\)"):
        broker.answer(pending["id"], "again", by="reply", channel="telegram")
    # Still a DialogUnknown for the callers that caught that before.
    assert issubclass(DialogAlreadyAnswered, DialogUnknown) and issubclass(DialogAlreadyAnswered, AlreadyAnswered)


def test_a_question_left_by_its_channel_ends_unanswered() -> None:
    broker = DialogBroker(timeout_s=30)
    thread, got = waiting(broker, lambda: broker.ask("telegram", QUESTION))
    [pending] = broker.pending()
    assert broker.leave(pending["id"], by="telegram:stopped") is True
    thread.join(10)
    assert got == [(None, "telegram:stopped")]
    assert broker.leave(pending["id"], by="telegram:stopped") is False


class _Outbox:
    def __init__(self) -> None:
        self.answers: list[tuple[str, str, str]] = []

    def undelivered(self) -> list[dict[str, Any]]:
        return [{"id": "m1", "channel": "telegram", "address": "42", "text": "the answer", "kind": "answer", "turn_id": "t1",
                 "attempts": 10, "cause": "502", "queued_at": "2026-01-01T00:00:00+00:00", "given_up_at": None}]

    def knows(self, message_id: str) -> bool:
        return message_id == "m1"

    def answer(self, message_id: str, action: str, *, by: str, channel: str) -> dict[str, Any]:
        self.answers.append((message_id, action, f"{channel}:{by}"))
        return {"id": message_id, "action": action, "by": f"{channel}:{by}"}


class _Host:
    def __init__(self) -> None:
        self.approvals = ApprovalBroker(timeout_s=30)
        self.dialogs = DialogBroker(timeout_s=30)
        self.outbox = _Outbox()


def test_the_inbox_lists_every_kind_and_sends_each_answer_to_the_broker_that_holds_it() -> None:
    host = _Host()
    approval, approved = waiting(host.approvals, lambda: host.approvals.ask("http", 1, "write_files", {}, "it writes"))
    question, answered = waiting(host.dialogs, lambda: host.dialogs.ask("telegram", QUESTION))
    items = inbox.items(host)
    assert [i["kind"] for i in items] == ["approval", "question", "undelivered"]
    ids = {i["kind"]: i["id"] for i in items}
    with pytest.raises(inbox.BadAnswer, match="is an approval: answer it yes or no"):
        inbox.answer(host, ids["approval"], channel="cli", by="user", text="yes")
    assert inbox.answer(host, ids["approval"], channel="cli", by="user", approve=False)["by"] == "cli:user"
    assert inbox.answer(host, ids["question"], channel="cli", by="user", text="~/a.txt")["by"] == "cli:user"
    assert inbox.answer(host, "m1", channel="telegram", by="button", action="retry")["by"] == "telegram:button"
    approval.join(10)
    question.join(10)
    assert approved == [(False, "cli:user")] and answered == [("~/a.txt", "cli:user")]
    with pytest.raises(AlreadyAnswered, match=r"already answered on cli"):
        inbox.answer(host, ids["question"], channel="http", by="user", text="again")
    with pytest.raises(PendingUnknown, match="nothing in the inbox has the id 'nope'"):
        inbox.answer(host, "nope", channel="http", by="user", approve=True)
