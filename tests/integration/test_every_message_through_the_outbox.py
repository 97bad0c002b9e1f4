"""Issue 35 item 1 (and 3): every message that leaves goes through the outbox of events, and what waits is in the log.

The Bot API is the stand-in on 127.0.0.1 (tests/support/fake_telegram.py), failing
on purpose; the model is the scripted LLM server; send_messages runs signed, in
bubblewrap, reaching the stand-in through the egress proxy ([network] allow). The
daemon here does not poll Telegram (no allowed chat): these are the messages of
a turn's own send_messages step and of the scheduler, which used to bypass the
outbox. Then two daemon hosts on one log: a question asked through one, and a
message one gave up on, are listed and answered through the other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from domain.delivery import RetryRule
from metnos.adapters.cli import main
from metnos.runtime.booted import Runtime
from metnos.runtime.step.dialog_tools import Question
from metnos.services import delivery, inbox, outgoing
from metnos.services.dialogs import DialogAlreadyAnswered
from metnos.services.host import DaemonHost
from metnos.services.pending import AlreadyAnswered
from metnos.settings.workspace import Workspace
from tests.support.fake_telegram import FakeBotAPI
from tests.support.scripted_llm import ScriptedLLM, call, text

pytestmark = pytest.mark.bwrap

TOKEN = "123456:TEST-step-outbox-not-a-real-token"
MARCO = 5551
BODY = "The train is 20 minutes late."
QUICK = RetryRule(first_delay_s=0.3, max_delay_s=0.6, max_attempts=3)


@pytest.fixture
def bot(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBotAPI]:
    # send_messages reads the token from the variable [telegram] token_env names (METNOS_TELEGRAM_TOKEN by default).
    monkeypatch.setenv("METNOS_TELEGRAM_TOKEN", TOKEN)
    with FakeBotAPI(TOKEN) as api:
        Workspace.from_env().config_file.write_text(
            f'[network]\nallow = ["127.0.0.1:{api.url.rsplit(":", 1)[1]}"]\n\n'
            f'[telegram]\nbase_url = "{api.url}"\ntimeout_s = 2\n\n[telegram.chat_ids]\nmarco = {MARCO}\n')
        yield api


def daemon_host(llm: ScriptedLLM | None, monkeypatch: pytest.MonkeyPatch, runtime: Runtime | None = None) -> DaemonHost:
    """The daemon's host on a booted runtime, its outbox sending through send_messages, as `metnos daemon` wires it."""
    if llm is not None:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
    runtime = runtime or Runtime.boot(Workspace.from_env())
    import os

    host = DaemonHost(runtime, env=dict(os.environ), approval_timeout_s=30)
    host.outbox.rule = QUICK
    host.outbox.serve_by_executor(outgoing.executor_sender(host))
    return host


def outbox_events(runtime: Runtime, message_id: str | None = None) -> list[tuple[str, Any]]:
    names = ("MessageQueued", "MessageSent", "MessageFailed", "MessageGivenUp", "MessageRetried", "MessageDismissed")
    return [(type(e).__name__, e) for _, e in runtime.log.domain_events() if type(e).__name__ in names
            and (message_id is None or e.originator_id.hex == message_id.replace("-", ""))]


def wait_until(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout:.0f} s")


def tell_marco() -> list[Any]:
    return [call("send_messages", {"channel": "telegram", "messages": [{"to_user": "marco", "body": BODY}]}), text("Told Marco.")]


def test_a_step_message_the_bot_api_refused_is_queued_retried_and_arrives_once(bot: FakeBotAPI, monkeypatch) -> None:
    # The step's own attempt gets a 502: before the outbox, the message was simply lost.
    bot.faults = ["fail"]
    with ScriptedLLM(tell_marco()) as llm:
        host = daemon_host(llm, monkeypatch)
        try:
            outcome = host.ask("tell marco the train is late", approver=lambda *_: (True, "test:yes"), channel="http")
            said = outgoing.notice(host.outbox, outcome.turn_id)
            sent = bot.wait_for("sendMessage", lambda p: p["chat_id"] == MARCO, timeout=30)
            [queued] = [e for name, e in outbox_events(host.runtime) if name == "MessageQueued"]
            message_id = str(queued.originator_id)
            wait_until("the MessageSent event", lambda: any(n == "MessageSent" for n, _ in outbox_events(host.runtime, message_id)))
            time.sleep(1.0)
            events = outbox_events(host.runtime, message_id)
            invocations = [e for _, e in host.runtime.log.domain_events() if type(e).__name__ == "InvocationRequested"]
        finally:
            host.close()
            host.runtime.close()
    # The step's own attempt failed, and the turn says so; the notice says the message is on its way still.
    assert outcome.status in ("answered", "failed")
    # Queued before the step ran, for its turn, to the recipient as the step named them.
    assert (queued.kind, queued.channel, queued.address, queued.text, queued.turn_id) == ("message", "telegram", "marco", BODY, outcome.turn_id)
    assert [n for n, _ in events] == ["MessageQueued", "MessageFailed", "MessageSent"]
    assert "Network" in events[1][1].cause and TOKEN not in events[1][1].cause
    assert events[2][1].attempt == 2 and events[2][1].receipt == str(sent.result["message_id"])
    # The turn's reply says the message was not sent yet, and where it went.
    assert "queued in the outbox" in said
    # Sent once: the refused attempt, then the retry; the retry is an invocation of send_messages by the outbox.
    assert [p["text"] for p in bot.sent() if p["chat_id"] == MARCO] == [BODY]
    assert [r.params["text"] for r in bot.refused] == [BODY]
    assert [i.caller.get("kind") for i in invocations if i.executor == "send_messages"] == ["user", "outbox"]


def test_a_step_message_given_up_is_undelivered_in_turns_show_survives_a_restart_and_is_retried(
        bot: FakeBotAPI, monkeypatch, capsys) -> None:
    bot.down = True
    with ScriptedLLM(tell_marco()) as llm:
        host = daemon_host(llm, monkeypatch)
        try:
            outcome = host.ask("tell marco the train is late", approver=lambda *_: (True, "test:yes"), channel="http")
            [given_up] = wait_until("the message to be given up", lambda: host.outbox.undelivered(outcome.turn_id), timeout=30)
        finally:
            host.close()
            host.runtime.close()
    assert given_up["attempts"] == QUICK.max_attempts and given_up["kind"] == "message" and given_up["text"] == BODY
    assert not bot.sent()
    # `turns show` names the message that never arrived, from the log.
    assert main(["turns", "show", outcome.turn_id]) == 0
    shown = capsys.readouterr().out
    assert "undelivered" in shown.lower() and BODY in shown

    # The next start lists it in the one inbox, from the log; retried once the Bot API is back, it arrives once.
    bot.down = False
    host = daemon_host(None, monkeypatch)
    try:
        [item] = [i for i in inbox.items(host) if i["kind"] == inbox.UNDELIVERED]
        assert item["id"] == given_up["id"] and item["text"] == BODY and item["message_kind"] == "message"
        inbox.answer(host, item["id"], channel="cli", by="user", action="retry")
        bot.wait_for("sendMessage", lambda p: p["chat_id"] == MARCO, timeout=30)
        wait_until("the retry's MessageSent", lambda: any(n == "MessageSent" for n, _ in outbox_events(host.runtime, item["id"])))
        time.sleep(0.5)
        assert [i for i in inbox.items(host) if i["kind"] == inbox.UNDELIVERED] == []
    finally:
        host.close()
        host.runtime.close()
    assert [p["text"] for p in bot.sent() if p["chat_id"] == MARCO] == [BODY]


def test_a_scheduled_message_to_a_channel_the_daemon_does_not_poll_goes_through_the_outbox(bot: FakeBotAPI, monkeypatch) -> None:
    # [scheduler] deliver_to is "me" by default: name it in [telegram.chat_ids].
    config = Workspace.from_env().config_file
    config.write_text(config.read_text() + "me = 5552\n")
    bot.faults = ["hang"]
    bot.hang_s = 3.0
    host = daemon_host(None, monkeypatch)
    try:
        deliver = delivery.scheduled_delivery(host, lambda channel, sid: None, lambda: "me")
        notice = deliver("a-schedule", "telegram", "[weekly] the bins go out tonight")
        assert notice is not None and notice["kind"] == "queued"
        sent = bot.wait_for("sendMessage", lambda p: p["chat_id"] == 5552, timeout=40)
        wait_until("the MessageSent", lambda: any(n == "MessageSent" for n, _ in outbox_events(host.runtime, notice["message_id"])))
        events = outbox_events(host.runtime, notice["message_id"])
        # The local outbox folder is no outgoing message: the scheduler still writes it itself.
        assert deliver("a-schedule", "outbox", "x") is None
    finally:
        host.close()
        host.runtime.close()
    assert sent.params["text"] == "[weekly] the bins go out tonight"
    assert [n for n, _ in events] == ["MessageQueued", "MessageFailed", "MessageSent"]
    assert events[0][1].kind == "scheduled" and events[0][1].address == "me" and events[0][1].options == {"via": "send_messages"}


QUESTION = Question(step=1, tool="get_inputs", question="Which file should I read?", channel="http")


def test_a_question_asked_through_one_daemon_is_listed_and_answered_through_another(home: Path, monkeypatch) -> None:
    first = daemon_host(None, monkeypatch)
    # Another daemon on the same log: nothing of the first one's memory.
    second = daemon_host(None, monkeypatch, runtime=first.runtime)
    got: list[tuple[str | None, str]] = []
    asking = threading.Thread(target=lambda: got.append(first.dialogs.ask("http", QUESTION, request="read my notes")))
    try:
        asking.start()
        [item] = wait_until("the question listed by the second daemon", lambda: [
            i for i in inbox.items(second) if i["kind"] == inbox.QUESTION])
        assert item["question"] == QUESTION.question and item["request"] == "read my notes" and item["channel"] == "http"
        inbox.answer(second, item["id"], channel="telegram", by="reply", text="~/notes.md")
        asking.join(10)
        assert got == [("~/notes.md", "telegram:reply")]
        # The first answer counts, on either daemon; neither lists the question any more.
        with pytest.raises(DialogAlreadyAnswered, match="already answered on telegram"):
            inbox.answer(first, item["id"], channel="cli", by="user", text="other")
        assert [i for i in inbox.items(first) + inbox.items(second) if i["kind"] == inbox.QUESTION] == []
        # A question nobody answers is withdrawn from the log when its wait ends: the other daemon stops listing it.
        got.clear()
        asking = threading.Thread(target=lambda: got.append(first.dialogs.ask("http", QUESTION, timeout_s=1.0)))
        asking.start()
        wait_until("the second question", lambda: [i for i in second.dialogs.pending()])
        asking.join(10)
        assert got == [(None, "http:timeout")] and second.dialogs.pending() == []
    finally:
        first.close()
        second.close()
        first.runtime.close()


def test_a_message_one_daemon_gave_up_on_is_listed_and_retried_through_another(bot: FakeBotAPI, monkeypatch) -> None:
    first = daemon_host(None, monkeypatch)
    second = daemon_host(None, monkeypatch, runtime=first.runtime)
    try:
        # The second daemon has read the outbox before the first gives this message up.
        assert [i for i in inbox.items(second) if i["kind"] == inbox.UNDELIVERED] == []
        bot.down = True
        message_id = first.outbox.queue(channel="telegram", address="marco", text=BODY, kind="message")
        wait_until("the message to be given up", lambda: first.outbox.undelivered())
        [item] = wait_until("the second daemon to list it", lambda: [i for i in inbox.items(second) if i["kind"] == inbox.UNDELIVERED])
        assert item["id"] == message_id
        bot.down = False
        inbox.answer(second, message_id, channel="http", by="user", action="retry")
        with pytest.raises(AlreadyAnswered, match="already answered on http"):
            inbox.answer(first, message_id, channel="telegram", by="button", action="dismiss")
        bot.wait_for("sendMessage", lambda p: p["chat_id"] == MARCO, timeout=30)
    finally:
        first.close()
        second.close()
        first.runtime.close()


def test_a_message_a_cli_turn_could_not_send_is_said_and_sent_by_the_daemon_at_its_start(bot: FakeBotAPI, monkeypatch, capsys) -> None:
    bot.down = True
    with ScriptedLLM(tell_marco()) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        main(["ask", "--yes", "tell marco the train is late"])
        said = capsys.readouterr().err
    # Not silence: the command says the message waits, and for whom.
    assert "1 message(s) could not be sent yet" in said and "retried with backoff by the daemon" in said, said
    assert not bot.sent()
    # The daemon's next start sends it, once.
    bot.down = False
    host = daemon_host(None, monkeypatch)
    try:
        sent = bot.wait_for("sendMessage", lambda p: p["chat_id"] == MARCO, timeout=30)
        [queued] = [e for name, e in outbox_events(host.runtime) if name == "MessageQueued"]
        wait_until("the MessageSent", lambda: any(n == "MessageSent" for n, _ in outbox_events(host.runtime, str(queued.originator_id))))
        time.sleep(1.0)
        names = [n for n, _ in outbox_events(host.runtime, str(queued.originator_id))]
    finally:
        host.close()
        host.runtime.close()
    assert sent.params["text"] == BODY and [p["text"] for p in bot.sent()] == [BODY]
    assert names == ["MessageQueued", "MessageFailed", "MessageSent"]


def test_a_commands_outbox_leaves_what_the_daemon_queued_alone(home: Path, monkeypatch) -> None:
    """A command that reads the outbox while the daemon runs (`metnos ask` saying what its turn left queued) claims
    nothing: a prompt the daemon queued is not taken for one left over from before a restart."""
    host = daemon_host(None, monkeypatch)
    try:
        # No Telegram channel in this host: the prompt stays queued, as one in flight does.
        prompt = host.outbox.queue(channel="telegram", address="4242", text="Approve write_files?", kind="approval")
        command = outgoing.outbox_of(host.runtime)
        assert command.undelivered() == [] and command.knows(prompt)
        assert [m["id"] for m in command.waiting("")] == [prompt]
        assert [n for n, _ in outbox_events(host.runtime, prompt)] == ["MessageQueued"]
    finally:
        host.close()
        host.runtime.close()
