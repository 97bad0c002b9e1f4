"""Issue 35 items 3 and 4 in a real headless Chromium, against a real ``metnos daemon`` with its Telegram channel.

One inbox: a turn started in a Telegram chat (the fake Bot API on 127.0.0.1) waits for
an approval that the chat shows with its buttons and the dashboard lists, with the
request it is for; the dashboard's Approve runs the step, the chat is told where the
answer came from, the log names the way in that answered, and a second answer, on
any way in, is refused as already given. Live: a turn running in the daemon is
listed at once, its page shows its steps as they are recorded (before the turn
commits them to the log), and its Stop ends it at the next safe point, recorded as
interrupted by that Stop.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen

from metnos.settings.workspace import Workspace
from tests.integration.test_dashboard_browser import browser, sign_in, wait  # noqa: F401 - browser is a fixture
from tests.support.cli_process import metnos_env, run
from tests.support.daemon_process import RunningDaemon, start_daemon
from tests.support.fake_telegram import FakeBotAPI
from tests.support.layouts import layout_env
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.support.workspace_template import initialise

pytestmark = pytest.mark.bwrap

TOKEN = "654321:TEST-one-inbox"
TOKEN_ENV = "METNOS_TEST_TELEGRAM_TOKEN"
CHAT = 5151


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
    root = tmp_path_factory.mktemp("inbox")
    env = metnos_env(layout_env("metnos_home", root, os.environ), METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted",
                     **{TOKEN_ENV: TOKEN})
    initialise(env)
    config = Workspace.from_env(env).config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text((config.read_text() if config.exists() else "") + f'\n[telegram]\ntoken_env = "{TOKEN_ENV}"\nallowed_chats = [{CHAT}]\n'
                      f'base_url = "{bot.url}"\napproval_timeout_s = 120\npoll_timeout_s = 1\n')
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


def turn_events(daemon: RunningDaemon, turn_id: str) -> list[dict[str, Any]]:
    with daemon.client() as client:
        return client.get(f"/api/turns/{turn_id}").json()["events"]


def test_a_turn_started_in_telegram_is_approved_on_the_dashboard(daemon: RunningDaemon, llm: ScriptedLLM, bot: FakeBotAPI,
                                                                 browser: Any) -> None:
    target = home_of(daemon) / "inbox-note.txt"
    llm.add(call("write_files", {"files": [{"path": str(target), "content": "milk"}]}), text("I wrote milk in the note."))
    before = len(bot.calls)
    bot.user_says(CHAT, "write milk in ~/inbox-note.txt")
    question = bot.wait_for("sendMessage", lambda p: "reply_markup" in p, after=before)
    sign_in(browser, daemon)
    browser.get(daemon.url + "/approvals")
    card = wait(browser, seen.visibility_of_element_located((By.CSS_SELECTOR, "section.approval")))
    # The card says what the approval is for, whichever way in the turn came from.
    assert "write milk in ~/inbox-note.txt" in card.text and "via telegram" in card.text and "write_files" in card.text, card.text
    assert not target.exists()
    card.find_element(By.CSS_SELECTOR, "button.approve").click()
    wait(browser, seen.text_to_be_present_in_element((By.CSS_SELECTOR, "section.approval.answered"), "approved"))
    done = bot.wait_for("sendMessage", lambda p: "wrote milk" in p["text"], after=before)
    assert done.params["chat_id"] == CHAT
    assert target.read_text() == "milk"
    # The chat is told that the question was answered elsewhere, and its buttons are taken away.
    assert bot.wait_for("sendMessage", lambda p: "write_files (http:user)" in p["text"], after=before)
    assert bot.wait_for("editMessageReplyMarkup", lambda p: p["message_id"] == question.result["message_id"], after=before)
    with daemon.client() as client:
        [turn] = [t for t in client.get("/api/turns").json() if t["text"] == "write milk in ~/inbox-note.txt"]
    [answered] = [e["state"] for e in turn_events(daemon, turn["id"]) if e["type"] == "ApprovalAnswered"]
    assert (answered["approved"], answered["by"]) == (True, "http:user")
    [started] = [e["state"] for e in turn_events(daemon, turn["id"]) if e["type"] == "TurnStarted"]
    assert started["channel"] == "telegram"


def test_the_first_answer_counts_and_the_second_is_told_where_it_came_from(daemon: RunningDaemon, llm: ScriptedLLM,
                                                                           bot: FakeBotAPI) -> None:
    # A second device speaks: paired as a guest (the chat paired first and is the host).
    with daemon.client() as guest:
        llm.add(text("Hello."))
        said = guest.post("/api/ask", json={"text": "say hello"}, headers={"x-metnos-device": "guest-phone"}).json()
        assert said["status"] == "answered", said
    target = home_of(daemon) / "inbox-second.txt"
    llm.add(call("write_files", {"files": [{"path": str(target), "content": "eggs"}]}), text("I wrote eggs."))
    before = len(bot.calls)
    bot.user_says(CHAT, "write eggs in ~/inbox-second.txt")
    question = bot.wait_for("sendMessage", lambda p: "reply_markup" in p, after=before)
    with daemon.client() as client:
        [pending] = client.get("/api/approvals").json()
        # A guest gives no approval, whichever way in asked.
        refused = client.post(f"/api/approvals/{pending['id']}", json={"approve": True}, headers={"x-metnos-device": "guest-phone"})
        assert refused.status_code == 403 and "guest" in refused.json()["error"]["message"], refused.text
        approve = question.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        bot.press(question.result, approve)
        bot.wait_for("answerCallbackQuery", lambda p: p.get("text") == "Approved", after=before)
        second = client.post(f"/api/approvals/{pending['id']}", json={"approve": False})
    assert second.status_code == 409, second.text
    assert "already answered on telegram (telegram:button)" in second.json()["error"]["message"]
    bot.wait_for("sendMessage", lambda p: "wrote eggs" in p["text"], after=before)
    assert target.read_text() == "eggs"


def test_a_running_turn_shows_its_steps_live_and_stops_at_a_safe_point(daemon: RunningDaemon, llm: ScriptedLLM, bot: FakeBotAPI,
                                                                       browser: Any) -> None:
    # Started in the chat (the host's: it paired first), watched and stopped on the dashboard.
    note = home_of(daemon) / "live-source.txt"
    note.write_text("first line\n")
    target = home_of(daemon) / "live-target.txt"
    llm.add(call("read_files", {"paths": [str(note)]}),
            call("write_files", {"files": [{"path": str(target), "content": "copied"}]}), text("Copied."))
    before = len(bot.calls)
    bot.user_says(CHAT, "read ~/live-source.txt and write its line to ~/live-target.txt")
    sign_in(browser, daemon)

    # Listed while it runs, before the log holds it (its read-only step is not committed yet).
    def listed(driver: Any) -> Any:
        driver.get(daemon.url + "/")
        found = driver.find_elements(By.PARTIAL_LINK_TEXT, "read ~/live-source.txt and write")
        return found[0] if found else False

    wait(browser, listed).click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, "live-events"), "ApprovalAsked"))
    shown = browser.find_element(By.ID, "live-events").text
    assert "StepProposed (step 1)" in shown and "read_files" in shown and "StepInvoked (step 1)" in shown, shown
    assert "write_files" in shown
    assert browser.find_element(By.ID, "turn-status").text == "running"
    browser.find_element(By.ID, "stop").click()
    # Ended and loaded again from the log: interrupted by the Stop, the write never made.
    wait(browser, seen.text_to_be_present_in_element((By.ID, "turn-status"), "interrupted"))
    assert "interrupted by a Stop on http" in browser.find_element(By.ID, "outcome").text
    told = bot.wait_for("sendMessage", lambda p: "interrupted" in p["text"] and "reply_markup" not in p, after=before)
    assert told.params["chat_id"] == CHAT
    assert not target.exists()
    with httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {daemon.token}"}) as client:
        assert client.get("/api/approvals").json() == []
        assert client.post("/api/turns/01a2/stop").status_code == 409  # nothing of that id runs
