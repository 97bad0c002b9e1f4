"""Issue 35 item 1: an answer is never lost because the channel is down, and the daemon stops cleanly.

The Bot API is the stand-in on 127.0.0.1 (tests/support/fake_telegram.py),
made to fail (502) and to hang on purpose; the model is the scripted LLM
server; the executors run in bubblewrap. In process: a Telegram answer the
Bot API refuses, then hangs on, is retried with backoff and arrives once; one
it refuses for good is given up after the bound and shown undelivered by
``turns show`` and the dashboard. A real ``metnos daemon``, SIGTERMed in the
middle of a turn while the Bot API is down: it refuses new work with 503,
interrupts the turn at its safe point, tells the chat whose message waited,
exits within seconds, and the next start delivers each queued message once.
"""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from domain.delivery import RetryRule
from metnos.adapters.channels.telegram import TelegramChannel
from metnos.adapters.cli import main
from metnos.adapters.daemon.app import build_app
from metnos.runtime.booted import Runtime
from metnos.services.host import DaemonHost, RuntimeHost
from metnos.settings.config_file import load_telegram_settings
from metnos.settings.workspace import Workspace
from tests.support.cli_process import metnos_env, run, wait_for
from tests.support.daemon_process import start_daemon
from tests.support.fake_telegram import FakeBotAPI
from tests.support.layouts import layout_env
from tests.support.scripted_llm import ScriptedLLM, call, slow, text
from tests.support.workspace_template import initialise

pytestmark = pytest.mark.bwrap

TOKEN = "123456:TEST-outbox-not-a-real-token"
TOKEN_ENV = "METNOS_TEST_TELEGRAM_TOKEN"
CHAT = 4242
ANSWER = "It is noon where you are."
# Quick enough for a test, the same shape as the daemon's (doubling, a ceiling, a bound).
QUICK = RetryRule(first_delay_s=0.2, max_delay_s=0.4, max_attempts=3)


@pytest.fixture
def bot(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBotAPI]:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with FakeBotAPI(TOKEN) as api:
        yield api


def telegram_config(api: FakeBotAPI) -> str:
    # timeout_s: how long a send waits for the Bot API, so that a hang costs a second, not a minute.
    return (f'[telegram]\ntoken_env = "{TOKEN_ENV}"\nallowed_chats = [{CHAT}]\nbase_url = "{api.url}"\n'
            "poll_timeout_s = 1\ntimeout_s = 1\n")


def channel_on(api: FakeBotAPI, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> tuple[Runtime, TelegramChannel]:
    monkeypatch.setenv("METNOS_LLM_URL", llm.url)
    monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
    workspace = Workspace.from_env()
    workspace.config_file.write_text(telegram_config(api))
    runtime = Runtime.boot(workspace)
    host = RuntimeHost(runtime)
    host.outbox.rule = QUICK
    channel = TelegramChannel(host, load_telegram_settings(workspace.config_file), log=lambda _: None)
    channel.start()
    return runtime, channel


def delivery_events(runtime: Runtime) -> list[tuple[str, Any]]:
    topics = ("MessageQueued", "MessageSent", "MessageFailed", "MessageGivenUp")
    return [(type(e).__name__, e) for _, e in runtime.log.domain_events() if type(e).__name__ in topics]


def wait_for_event(runtime: Runtime, name: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for n, e in delivery_events(runtime) if n == name]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no {name} in {timeout} s: {[n for n, _ in delivery_events(runtime)]}")


@pytest.mark.parametrize("layout", ["xdg"])
def test_an_answer_the_bot_api_refuses_then_hangs_on_is_retried_with_backoff_and_arrives_once(
        bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    bot.faults = ["fail", "hang"]
    bot.hang_s = 3.0
    with ScriptedLLM([text(ANSWER)]) as llm:
        runtime, channel = channel_on(bot, llm, monkeypatch)
        try:
            request = bot.user_says(CHAT, "what time is it?")
            answer = bot.wait_for("sendMessage", lambda p: p["chat_id"] == CHAT and p["text"] == ANSWER, timeout=30)
            sent = wait_for_event(runtime, "MessageSent")
        finally:
            channel.stop()
    # Refused once (502), hung once (the bot gave up after timeout_s), delivered at the third attempt, and only then.
    assert [c.result for c in bot.refused] == ["fail", "hang"]
    assert [p["text"] for p in bot.sent() if p["chat_id"] == CHAT] == [ANSWER]
    assert answer.params["reply_parameters"]["message_id"] == request["message_id"]
    events = delivery_events(runtime)
    assert [n for n, _ in events] == ["MessageQueued", "MessageFailed", "MessageFailed", "MessageSent"]
    queued, first, second = (e for _, e in events[:3])
    assert (queued.kind, queued.channel, queued.address, queued.text) == ("answer", "telegram", str(CHAT), ANSWER)
    assert queued.reply_to == str(request["message_id"])
    runtime.refresh()
    [turn_id] = runtime.turns.state()["turns"]
    assert queued.turn_id == turn_id
    assert (first.attempt, second.attempt, sent.attempt) == (1, 2, 3)
    assert "502" in first.cause or "Bad Gateway" in first.cause
    assert "Timed out" in second.cause or "TimedOut" in second.cause
    # Exponential backoff: 0.2 s after the first failure, twice that after the second.
    waits = [round((datetime.fromisoformat(e.next_attempt_at) - e.timestamp).total_seconds(), 3) for e in (first, second)]
    assert waits == [0.2, 0.4]
    assert sent.receipt == str(answer.result["message_id"])
    assert TOKEN not in repr([e.__dict__ for _, e in events])
    runtime.close()


@pytest.mark.parametrize("layout", ["xdg"])
def test_an_answer_the_bot_api_refuses_for_good_is_given_up_and_shown_undelivered(
        bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bot.down = True
    with ScriptedLLM([text(ANSWER)]) as llm:
        runtime, channel = channel_on(bot, llm, monkeypatch)
        try:
            bot.user_says(CHAT, "what time is it?")
            given_up = wait_for_event(runtime, "MessageGivenUp")
            bot.down = False
            # Given up is final: the Bot API back up does not bring a late copy.
            time.sleep(1.0)
        finally:
            channel.stop()
    assert given_up.attempt == QUICK.max_attempts and "Bad Gateway" in given_up.cause
    assert [n for n, _ in delivery_events(runtime)] == ["MessageQueued", "MessageFailed", "MessageFailed", "MessageGivenUp"]
    assert len(bot.refused) == 3 and not bot.sent()
    runtime.refresh()
    [turn_id] = runtime.turns.state()["turns"]
    assert runtime.turns.state()["turns"][turn_id]["status"] == "answered"

    with TestClient(build_app(DaemonHost(runtime, env={}), "t0k", mounts=[])) as client:
        headers = {"Authorization": "Bearer t0k", "Accept": "text/html"}
        page = client.get(f"/turns/{turn_id}", headers=headers).text
        timeline = client.get("/", headers=headers).text
    section = page[page.index('id="undelivered"'):]
    assert f"to telegram {CHAT} never arrived: given up after 3 attempt(s)" in section and ANSWER in section
    row = timeline[timeline.index(f'href="/turns/{turn_id}"') - 400:timeline.index(f'href="/turns/{turn_id}"')]
    assert '<span class="badge undelivered">undelivered</span>' in row
    runtime.close()

    capsys.readouterr()
    assert main(["turns", "show", turn_id[:8]]) == 0
    shown = capsys.readouterr().out
    assert f"UNDELIVERED answer to telegram {CHAT}: given up after 3 attempt(s)" in shown
    assert f"    | {ANSWER}" in shown
    assert main(["turns", "show", turn_id[:8], "--json"]) == 0
    [lost] = orjson.loads(capsys.readouterr().out)["undelivered"]
    assert (lost["text"], lost["status"], lost["attempts"]) == (ANSWER, "given_up", 3)


def test_sigterm_mid_turn_stops_cleanly_and_the_next_start_delivers_each_queued_message_once(tmp_path: Path) -> None:
    # The model thinks longer than the 2 s a stopping daemon lets a turn take to end by itself.
    script = [slow(call("get_now", {}), 5.0), text(ANSWER)]
    with FakeBotAPI(TOKEN) as bot, ScriptedLLM(script) as llm:
        env = metnos_env(layout_env("metnos_home", tmp_path, os.environ), METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted",
                         **{TOKEN_ENV: TOKEN})
        initialise(env)
        Workspace.from_env(env).config_file.write_text(telegram_config(bot))
        bot.down = True
        daemon = start_daemon(env)
        try:
            bot.user_says(CHAT, "what time is it?")
            wait_for(lambda: llm.requests, timeout=60, what="the turn to ask the model", proc=daemon.proc)
            # A second message waits behind the running turn when the stop comes.
            bot.user_says(CHAT, "and the date?")
            time.sleep(0.5)
            stopped_at = time.monotonic()
            daemon.proc.send_signal(signal.SIGTERM)
            refused = None
            while daemon.proc.poll() is None and refused is None:
                try:
                    answer = httpx.get(f"{daemon.url}/api/turns", headers={"Authorization": f"Bearer {daemon.token}"}, timeout=5)
                    refused = answer if answer.status_code == 503 else None
                except httpx.TransportError:
                    break
                time.sleep(0.05)
            out, err = daemon.proc.communicate(timeout=30)
            took = time.monotonic() - stopped_at
        finally:
            daemon.stop()
        assert refused is not None, err
        assert refused.json()["error"]["kind"] == "DaemonStopping" and "ask again once it has restarted" in refused.json()["error"]["message"]
        assert took < 10, f"the daemon took {took:.1f} s to stop"
        assert "Traceback" not in err and TOKEN not in out + err
        assert not bot.sent()

        logged = events_of(env)
        [started] = logged["TurnStarted"]
        assert started["state"]["text"] == "what time is it?"  # the waiting message ran no turn
        [interrupted] = logged["TurnInterrupted"]
        assert interrupted["state"]["signal"] == "SIGTERM"
        # Stopped in the wait, not after the reply it would not use.
        assert interrupted["state"]["during"] == "while waiting for the model"
        queued = {e["state"]["kind"]: e["state"] for e in logged["MessageQueued"]}
        assert set(queued) == {"answer", "notice"}
        assert "interrupted" in queued["answer"]["text"]
        assert "The daemon is stopping: this message was not run" in queued["notice"]["text"]
        assert not logged["MessageSent"]

        # The Bot API back, the daemon again: each queued message goes out, once.
        bot.down = False
        daemon = start_daemon(env)
        try:
            for state in queued.values():
                bot.wait_for("sendMessage", lambda p, t=state["text"]: p["text"] == t, timeout=30)
            time.sleep(0.5)
        finally:
            daemon.stop()
    texts = [p["text"] for p in bot.sent() if p["chat_id"] == CHAT]
    assert sorted(texts) == sorted(s["text"] for s in queued.values())
    sent = events_of(env)["MessageSent"]
    assert sorted(e["aggregate_id"] for e in sent) == sorted(e["aggregate_id"] for e in logged["MessageQueued"])


def events_of(env: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """The log's events by their class's name, read by ``metnos events`` in a process of its own."""
    done = run(["events", "--json"], env)
    assert done.returncode == 0, done.stderr
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in map(orjson.loads, done.stdout.splitlines()):
        found[event["topic"].rsplit(".", 1)[-1]].append(event)
    return found
