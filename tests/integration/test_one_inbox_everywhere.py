"""Issue 35 item 3, one inbox on every way in: approvals, questions and undelivered messages, whichever way in asked.

A real ``metnos daemon`` with its Telegram channel (the Bot API stand-in on
127.0.0.1, made to fail on purpose), the scripted model, ``metnos inbox`` run
as a process of its own, and the dashboard in a real headless Chromium:

* a question asked by a turn started in a Telegram chat is listed by ``metnos
  inbox`` with the request it is for, answered there (and so is the approval
  that follows), the chat is told where the answer came from, and a second
  answer, on the CLI or over HTTP, is refused naming the first (409 on HTTP);
* a question asked over HTTP is shown in the chat by ``/inbox`` and answered
  by a reply to it; a second reply is told where the first answer came from;
* an answer the Bot API refuses past the bound is undelivered: it is on the
  dashboard's inbox and in the chat's ``/inbox``, its Retry on the dashboard
  sends it once the Bot API is back, and a second answer (dismiss, over HTTP,
  the CLI or the chat's button) is refused;
* a scheduled firing's message to Telegram goes through the outbox: queued,
  refused, retried, sent.

Each answer is an event naming its channel.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen

from metnos.settings.workspace import Workspace
from tests.integration.test_dashboard_browser import browser, sign_in, wait  # noqa: F401 - browser is a fixture
from tests.support.cli_process import metnos_env, run, wait_for
from tests.support.daemon_process import RunningDaemon, start_daemon
from tests.support.fake_telegram import FakeBotAPI
from tests.support.layouts import layout_env
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.support.workspace_template import initialise

pytestmark = pytest.mark.bwrap

TOKEN = "765432:TEST-one-inbox-everywhere"
TOKEN_ENV = "METNOS_TEST_TELEGRAM_TOKEN"
CHAT = 6161


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="module")
def bot() -> Iterator[FakeBotAPI]:
    with FakeBotAPI(TOKEN) as api:
        yield api


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLLM, bot: FakeBotAPI) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("inbox-everywhere")
    env = metnos_env(layout_env("metnos_home", root, os.environ), METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted",
                     **{TOKEN_ENV: TOKEN})
    initialise(env)
    config = Workspace.from_env(env).config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    # Two quick tries before a message is given up; the scheduler's messages go to the chat ("me").
    config.write_text((config.read_text() if config.exists() else "")
                      + "\n[daemon]\napproval_timeout_s = 120\ndelivery_attempts = 2\ndelivery_first_delay_s = 0.2\n"
                        "delivery_max_delay_s = 0.4\n"
                      + f'\n[telegram]\ntoken_env = "{TOKEN_ENV}"\nallowed_chats = [{CHAT}]\nbase_url = "{bot.url}"\n'
                        "approval_timeout_s = 120\npoll_timeout_s = 1\ntimeout_s = 1\n"
                      + f"\n[telegram.chat_ids]\nme = {CHAT}\n")
    running = start_daemon(env)
    try:
        # The chat speaks first, so it is paired as the host whichever test runs first (each xdist worker has its own daemon).
        llm.add(text("Hello."))
        before = len(bot.calls)
        bot.user_says(CHAT, "say hello")
        bot.wait_for("sendMessage", lambda p: "Hello." in p["text"], after=before)
        yield running
    finally:
        running.stop()


def home_of(daemon: RunningDaemon) -> Path:
    return Path(daemon.env["HOME"])


def inbox(daemon: RunningDaemon, *argv: str) -> Any:
    """``metnos inbox`` as a process of its own: (exit code, stdout, stderr)."""
    done = run(["inbox", *argv], daemon.env, timeout=120)
    return done.returncode, done.stdout, done.stderr


def listed(daemon: RunningDaemon, kind: str) -> list[dict[str, Any]]:
    code, out, err = inbox(daemon, "list", "--json")
    assert code == 0, err
    return [i for i in orjson.loads(out) if i["kind"] == kind]


def events_of(daemon: RunningDaemon) -> dict[str, list[dict[str, Any]]]:
    done = run(["events", "--json"], daemon.env)
    assert done.returncode == 0, done.stderr
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in map(orjson.loads, done.stdout.splitlines()):
        found[event["topic"].rsplit(".", 1)[-1]].append(event)
    return found


def test_a_question_from_a_telegram_turn_is_answered_with_metnos_inbox_and_a_second_answer_is_refused(
        daemon: RunningDaemon, llm: ScriptedLLM, bot: FakeBotAPI) -> None:
    target = home_of(daemon) / "inbox-old.txt"
    target.write_text("old\n")
    llm.add(call("delete_files", {}), text("I deleted ~/inbox-old.txt."))
    before = len(bot.calls)
    request = "delete the file I do not need any more"
    bot.user_says(CHAT, request)
    bot.wait_for("sendMessage", lambda p: "Which files should I delete?" in p["text"], after=before)

    [question] = wait_for(lambda: listed(daemon, "question"), timeout=60, what="the question in the inbox")
    assert (question["channel"], question["question"], question["request"]) == ("telegram", "Which files should I delete?", request)
    code, out, _ = inbox(daemon)
    assert code == 0 and f"{question['id'][:8]}  question  via telegram  Which files should I delete?" in out, out
    assert f'for: "{request}"' in out and f"metnos inbox answer {question['id'][:8]}" in out
    code, out, err = inbox(daemon, "answer", question["id"][:8], "~/inbox-old.txt")
    assert code == 0 and out.strip() == f"answered {question['id'][:8]} (cli:user)", (out, err)
    # The chat that was asked is told where the answer came from.
    bot.wait_for("sendMessage", lambda p: p["text"] == "Answered on cli (cli:user): ~/inbox-old.txt", after=before)

    # The approval the answer leads to waits in the same inbox, and is answered there too.
    [approval] = wait_for(lambda: listed(daemon, "approval"), timeout=60, what="the approval in the inbox")
    assert approval["executor"] == "delete_files" and approval["channel"] == "telegram" and approval["request"] == request
    code, out, err = inbox(daemon, "yes", approval["id"][:8])
    assert code == 0 and out.strip() == f"approved {approval['id'][:8]} (cli:user)", (out, err)
    bot.wait_for("sendMessage", lambda p: "I deleted ~/inbox-old.txt." in p["text"], after=before)
    assert not target.exists()

    # A second answer, on any way in, is refused, naming the first: the CLI says so, HTTP is 409.
    code, out, err = inbox(daemon, "answer", question["id"], "something else")
    assert code == 2 and f"question {question['id']!r} was already answered on cli (cli:user)" in err, (out, err)
    with daemon.client() as client:
        again = client.post(f"/api/inbox/{question['id']}", json={"answer": "something else"})
        assert again.status_code == 409 and "already answered on cli (cli:user)" in again.json()["error"]["message"], again.text
        twice = client.post(f"/api/inbox/{approval['id']}", json={"approve": False})
        assert twice.status_code == 409 and "already answered on cli (cli:user)" in twice.json()["error"]["message"], twice.text
        wrong = client.post(f"/api/inbox/{approval['id']}", json={"approve": "yes"})
        assert wrong.status_code == 400 and '"approve" is true or false' in wrong.json()["error"]["message"]
    code, out, err = inbox(daemon, "no", "0123abcd")
    assert code == 2 and "nothing in the inbox has the id '0123abcd'" in err and "Traceback" not in err, err

    logged = events_of(daemon)
    [started] = [e for e in logged["TurnStarted"] if e["state"]["text"] == request]
    turn = started["aggregate_id"]
    [answered] = [e["state"] for e in logged["DialogAnswered"] if e["aggregate_id"] == turn]
    assert (answered["channel"], answered["answer"], answered["by"]) == ("telegram", "~/inbox-old.txt", "cli:user")
    [approved] = [e["state"] for e in logged["ApprovalAnswered"] if e["aggregate_id"] == turn]
    assert (approved["approved"], approved["by"]) == (True, "cli:user")
    assert started["state"]["channel"] == "telegram"


def test_a_question_asked_over_http_is_answered_from_telegram_with_inbox(daemon: RunningDaemon, llm: ScriptedLLM,
                                                                         bot: FakeBotAPI) -> None:
    # Another device (paired as a guest: the chat paired first) asks; the host's chat answers from /inbox.
    llm.add(call("request_location_from_user", {}), text("You are in Lisbon: look for a pharmacy there."))
    result: dict[str, Any] = {}
    request = "where is the nearest pharmacy?"
    with daemon.client() as client:
        asking = threading.Thread(target=lambda: result.update(
            client.post("/api/ask", json={"text": request}, headers={"x-metnos-device": "guest-phone"}).json()))
        asking.start()
        [pending] = wait_for(lambda: client.get("/api/dialogs").json(), timeout=60, what="the question to wait")
        assert pending["channel"] == "http" and pending["request"] == request
        before = len(bot.calls)
        # The reply reaches the bot before the answer to its sendMessage does: it is still read as the answer.
        bot.answer_late_s = 0.5
        try:
            bot.user_says(CHAT, "/inbox")
            shown = bot.wait_for("sendMessage", lambda p: "Question (asked via http)" in p["text"], after=before)
            assert "Where are you?" in shown.params["text"] and f"for: {request}" in shown.params["text"]
            assert "reply to this message" in shown.params["text"]
            # A reply to the message /inbox showed is the answer.
            bot.user_says(CHAT, "Lisbon", reply_to=shown.result)
        finally:
            bot.answer_late_s = 0.0
        asking.join(timeout=60)
        assert result["status"] == "answered", result
        # A second reply is told where the first answer came from; it starts no turn.
        later = len(bot.calls)
        bot.user_says(CHAT, "Porto", reply_to=shown.result)
        told = bot.wait_for("sendMessage", lambda p: "already answered" in p["text"], after=later)
        assert f"question {pending['id']!r} was already answered on telegram (telegram:reply)" in told.params["text"]
        events = client.get(f"/api/turns/{result['turn_id']}").json()["events"]
        assert not [t for t in client.get("/api/turns").json() if t["text"] == "Porto"]
    [answered] = [e["state"] for e in events if e["type"] == "DialogAnswered"]
    assert (answered["channel"], answered["answer"], answered["by"]) == ("http", "Lisbon", "telegram:reply")


def test_an_undelivered_answer_is_on_the_dashboard_and_retried_there_once(daemon: RunningDaemon, llm: ScriptedLLM,
                                                                          bot: FakeBotAPI, browser: Any) -> None:
    answer = "The answer that could not get through at first."
    llm.add(text(answer))
    bot.down = True
    try:
        bot.user_says(CHAT, "tell me something while the line is down")
        with daemon.client() as client:
            [lost] = wait_for(lambda: [i for i in client.get("/api/inbox").json() if i["kind"] == "undelivered"],
                              timeout=60, what="the answer to be given up")
        assert answer in lost["text"] and (lost["channel"], lost["address"], lost["attempts"]) == ("telegram", str(CHAT), 2), lost
        assert "502" in lost["cause"] or "Bad Gateway" in lost["cause"], lost
        sign_in(browser, daemon)
        browser.get(daemon.url + "/approvals")
        card = wait(browser, seen.visibility_of_element_located((By.ID, f"undelivered-{lost['id']}")))
        assert answer in card.text and "telegram" in card.text and "2 attempt(s)" in card.text, card.text
    finally:
        bot.down = False
    # The chat's /inbox shows it too, with its buttons.
    before = len(bot.calls)
    bot.user_says(CHAT, "/inbox")
    listed_in_chat = bot.wait_for("sendMessage", lambda p: "Undelivered answer to telegram" in p["text"], after=before)
    assert answer in listed_in_chat.params["text"]
    [[retry, dismiss]] = listed_in_chat.params["reply_markup"]["inline_keyboard"]
    assert (retry["callback_data"], dismiss["callback_data"]) == (f"rt:{lost['id']}", f"dm:{lost['id']}")
    before = len(bot.calls)
    card.find_element(By.CSS_SELECTOR, "button.retry").click()
    wait(browser, seen.text_to_be_present_in_element((By.CSS_SELECTOR, f"#undelivered-{lost['id']}.answered"), "queued again"))
    sent = bot.wait_for("sendMessage", lambda p: p["text"] == lost["text"], after=before)
    assert sent.params["chat_id"] == CHAT
    # Retried once: a second answer, dismiss, on any way in, is refused naming the first.
    with daemon.client() as client:
        again = client.post(f"/api/inbox/{lost['id']}", json={"action": "dismiss"})
        assert again.status_code == 409 and "already answered on http (http:user)" in again.json()["error"]["message"], again.text
        assert not [i for i in client.get("/api/inbox").json() if i["kind"] == "undelivered"]
    code, _, err = inbox(daemon, "dismiss", lost["id"])
    assert code == 2 and "already answered on http (http:user)" in err, err
    later = len(bot.calls)
    bot.press(listed_in_chat.result, dismiss["callback_data"])
    told = bot.wait_for("answerCallbackQuery", after=later)
    assert "already answered on http (http:user)" in told.params["text"], told.params
    logged = events_of(daemon)
    [retried] = [e for e in logged["MessageRetried"] if e["aggregate_id"] == lost["id"]]
    assert retried["state"]["by"] == "http:user"
    assert [e["aggregate_id"] for e in logged["MessageSent"]].count(lost["id"]) == 1
    assert not [e for e in logged["MessageDismissed"] if e["aggregate_id"] == lost["id"]]


def test_a_scheduled_message_to_telegram_goes_through_the_outbox(daemon: RunningDaemon, bot: FakeBotAPI) -> None:
    with daemon.client() as client:
        made = client.post("/api/schedules", json={"when": "every day at 7", "executor": "get_now", "args": {},
                                                   "channel": "telegram", "label": "morning time", "confirm": True},
                           # A device of its own: the dashboard's stays unpaired for the inbox tests, whatever their order.
                           headers={"x-metnos-device": "schedule-test"})
        assert made.status_code == 200, made.text
        schedule_id = made.json()["schedule_id"]
        # The first try fails: the message is retried with backoff and arrives once.
        bot.faults.append("fail")
        before = len(bot.calls)
        fired = client.post(f"/api/schedules/{schedule_id}/run-now")
        assert fired.status_code == 200, fired.text
        notice = fired.json()["notice"]
        assert (notice["channel"], notice["kind"], notice["ok"]) == ("telegram", "queued", True), notice
        sent = bot.wait_for("sendMessage", lambda p: p["text"].startswith("[morning time]"), after=before)
        assert sent.params["chat_id"] == CHAT
    logged = events_of(daemon)
    [queued] = [e for e in logged["MessageQueued"] if e["aggregate_id"] == notice["message_id"]]
    assert (queued["state"]["kind"], queued["state"]["address"]) == ("scheduled", str(CHAT))
    assert [e["aggregate_id"] for e in logged["MessageFailed"]].count(notice["message_id"]) == 1
    assert [e["aggregate_id"] for e in logged["MessageSent"]].count(notice["message_id"]) == 1
    # Not through send_messages: the outbox sent it.
    assert not [e for e in logged["InvocationRequested"] if e["state"].get("executor") == "send_messages"]


def test_an_mcp_call_whose_client_cannot_ask_waits_in_the_inbox_and_runs_as_a_turn(daemon: RunningDaemon) -> None:
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    target = home_of(daemon) / "inbox-from-mcp.txt"
    args = {"files": [{"path": str(target), "content": "tea\n"}]}
    got: dict[str, Any] = {}

    async def mcp_call() -> None:
        # No elicitation callback: this client cannot show a question to its user.
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {daemon.token}"}, timeout=120) as http, \
                Client(streamable_http_client(f"{daemon.url}/mcp/", http_client=http)) as client:
            got["result"] = await client.call_tool("write_files", args)

    calling = threading.Thread(target=lambda: asyncio.run(mcp_call()))
    calling.start()
    [approval] = wait_for(lambda: listed(daemon, "approval"), timeout=60, what="the MCP call's approval in the inbox")
    assert (approval["channel"], approval["executor"], approval["args"]) == ("mcp", "write_files", args)
    assert approval["request"].startswith("call write_files ")
    assert not target.exists()
    code, out, err = inbox(daemon, "yes", approval["id"][:8])
    assert code == 0 and out.strip() == f"approved {approval['id'][:8]} (cli:user)", (out, err)
    calling.join(timeout=120)
    result = got["result"]
    assert result.is_error is False, result.structured_content
    assert target.read_text() == "tea\n"
    turn_id = result.meta["metnos/turn_id"]
    with daemon.client() as client:
        events = client.get(f"/api/turns/{turn_id}").json()["events"]
        # From a device of the host's (never paired, so no guest): refused as a second answer, not as a guest's.
        again = client.post(f"/api/inbox/{approval['id']}", json={"approve": False}, headers={"x-metnos-device": "host-laptop"})
    assert again.status_code == 409 and "already answered on cli (cli:user)" in again.json()["error"]["message"], again.text
    [started] = [e["state"] for e in events if e["type"] == "TurnStarted"]
    assert (started["channel"], started["mode"]) == ("mcp", "call")
    [answered] = [e["state"] for e in events if e["type"] == "ApprovalAnswered"]
    assert (answered["approved"], answered["by"]) == (True, "cli:user")
