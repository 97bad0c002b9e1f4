"""Issue 35 item 3: the one inbox is pushed to the host's Telegram chat, not only pulled with /inbox.

The daemon's host in process with the Telegram channel polling the Bot API
stand-in (tests/support/fake_telegram.py); the model is the scripted LLM
server; executors run in bubblewrap. An approval asked over HTTP (the
dashboard's way in) is told to the host's chat at once, with its buttons, and
a press there answers it; a message given up is told with Retry and Dismiss.
Each item is told once: neither the next looks nor a restart of the channel
tell it again, and nothing is told to a guest's chat.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from domain.delivery import RetryRule
from metnos.adapters.channels.telegram import PUSHED, TelegramChannel
from metnos.runtime.booted import Runtime
from metnos.services import inbox
from metnos.services.host import DaemonHost
from metnos.settings.config_file import load_telegram_settings
from metnos.settings.workspace import Workspace
from tests.support.fake_telegram import FakeBotAPI
from tests.support.scripted_llm import ScriptedLLM, call, text

pytestmark = pytest.mark.bwrap

TOKEN = "123456:TEST-push-not-a-real-token"
TOKEN_ENV = "METNOS_TEST_TELEGRAM_TOKEN"
HOST_CHAT, GUEST_CHAT = 7171, 7272


@pytest.fixture
def bot(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBotAPI]:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with FakeBotAPI(TOKEN) as api:
        Workspace.from_env().config_file.write_text(
            f'[telegram]\ntoken_env = "{TOKEN_ENV}"\nallowed_chats = [{HOST_CHAT}, {GUEST_CHAT}]\nbase_url = "{api.url}"\n'
            "poll_timeout_s = 1\ntimeout_s = 1\napproval_timeout_s = 60\n")
        yield api


def pushes(bot: FakeBotAPI, chat: int) -> list[dict[str, Any]]:
    return [p for p in bot.sent() if p["chat_id"] == chat and p["text"].startswith(PUSHED)]


def test_a_new_approval_and_a_message_given_up_are_pushed_to_the_host_chat_once(bot: FakeBotAPI, monkeypatch, home: Path) -> None:
    target = home / "pushed.txt"
    with ScriptedLLM([call("write_files", {"files": [{"path": str(target), "content": "hello\n"}]}), text("Written.")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        runtime = Runtime.boot(Workspace.from_env())
        host = DaemonHost(runtime, env=dict(os.environ), approval_timeout_s=60)
        host.outbox.rule = RetryRule(first_delay_s=0.2, max_delay_s=0.4, max_attempts=2)
        # The host's chat speaks first (paired as the host); the other chat is a guest.
        host.pair("telegram", str(HOST_CHAT))
        host.pair("telegram", str(GUEST_CHAT))
        channel = TelegramChannel(host, load_telegram_settings(runtime.workspace.config_file), log=lambda _: None)
        channel.start()
        try:
            outcome: list[Any] = []
            request = "write hello to pushed.txt"
            asking = threading.Thread(target=lambda: outcome.append(host.ask(
                request, approver=host.approvals.approver("http", request=request), channel="http")))
            asking.start()
            told = bot.wait_for("sendMessage", lambda p: p["chat_id"] == HOST_CHAT and p["text"].startswith(PUSHED), timeout=60)
            [approval] = host.approvals.pending()
            assert "Approval (asked via http)" in told.params["text"] and "write_files" in told.params["text"]
            assert f"for: {request}" in told.params["text"]
            [[yes, no]] = told.params["reply_markup"]["inline_keyboard"]
            assert (yes["callback_data"], no["callback_data"]) == (f"ok:{approval['id']}", f"no:{approval['id']}")
            # Answered from the chat the push reached.
            bot.press(told.result, yes["callback_data"])
            asking.join(60)
            assert outcome and outcome[0].status == "answered" and target.read_text() == "hello\n"

            # A message given up is pushed too, with what answers it.
            bot.faults = ["fail", "fail"]
            lost = host.outbox.queue(channel="telegram", address=str(HOST_CHAT), text="the lost one", kind="notice")
            told_lost = bot.wait_for("sendMessage", lambda p: p["chat_id"] == HOST_CHAT and "the lost one" in p["text"]
                                     and p["text"].startswith(PUSHED), timeout=60)
            assert "Undelivered notice to telegram" in told_lost.params["text"]
            [[retry, dismiss]] = told_lost.params["reply_markup"]["inline_keyboard"]
            assert (retry["callback_data"], dismiss["callback_data"]) == (f"rt:{lost}", f"dm:{lost}")
            # Once per item: the next looks tell nothing more.
            time.sleep(3 * 1.0 + 1)
            assert len(pushes(bot, HOST_CHAT)) == 2
        finally:
            channel.stop()

        # A restart of the channel does not tell again what it told (the pushes are in the log).
        channel = TelegramChannel(host, load_telegram_settings(runtime.workspace.config_file), log=lambda _: None)
        channel.start()
        try:
            time.sleep(3.0)
        finally:
            channel.stop()
            host.close()
            runtime.close()
    assert len(pushes(bot, HOST_CHAT)) == 2
    # A guest answers nothing of the host's inbox, so it is told nothing of it.
    assert pushes(bot, GUEST_CHAT) == []


def test_an_approval_prompt_the_bot_api_refused_is_retried_and_still_answers(bot: FakeBotAPI, monkeypatch, home: Path) -> None:
    """Issue 35 item 1: Telegram's approval prompt goes through the outbox too; a 502 delays it, it does not lose it."""
    target = home / "prompted.txt"
    with ScriptedLLM([call("write_files", {"files": [{"path": str(target), "content": "hi\n"}]}), text("Written.")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        runtime = Runtime.boot(Workspace.from_env())
        host = DaemonHost(runtime, env=dict(os.environ), approval_timeout_s=60)
        host.outbox.rule = RetryRule(first_delay_s=0.3, max_delay_s=0.6, max_attempts=3)
        host.pair("telegram", str(HOST_CHAT))
        channel = TelegramChannel(host, load_telegram_settings(runtime.workspace.config_file), log=lambda _: None)
        channel.start()
        try:
            bot.faults = ["fail"]
            bot.user_says(HOST_CHAT, "write hi to prompted.txt")
            prompt = bot.wait_for("sendMessage", lambda p: p["chat_id"] == HOST_CHAT and "reply_markup" in p, timeout=60)
            [approval] = host.approvals.pending()
            assert prompt.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"] == f"ok:{approval['id']}"
            # Answered on the dashboard's way in: the prompt's buttons are taken off the message the outbox sent.
            inbox.answer(host, approval["id"], channel="http", by="user", approve=True)
            removed = bot.wait_for("editMessageReplyMarkup", timeout=30)
            bot.wait_for("sendMessage", lambda p: p["chat_id"] == HOST_CHAT and "Written." in p["text"], timeout=60)
        finally:
            channel.stop()
            host.close()
    events = [(type(e).__name__, e) for _, e in runtime.log.domain_events()
              if type(e).__name__ in ("MessageQueued", "MessageFailed", "MessageSent")]
    runtime.close()
    [queued] = [e for name, e in events if name == "MessageQueued" and e.kind == "approval"]
    assert [name for name, e in events if e.originator_id == queued.originator_id] == ["MessageQueued", "MessageFailed", "MessageSent"]
    # The one 502 was the prompt's first attempt; the second carried it.
    [refused] = bot.refused
    assert "reply_markup" in refused.params and "write_files" in refused.params["text"] and "write_files" in queued.text
    assert removed.params["message_id"] == prompt.result["message_id"]
    assert target.read_text() == "hi\n"
