"""Issue 21 item 2: the dashboard in a real headless Chromium, against a real ``metnos daemon``.

The browser logs in with the token, asks through the form, approves the
step on the approvals page, sees the step's verdicts (vaglio, approval,
sandbox) on the turn's page, replays it, previews the undo and undoes it,
pauses a schedule, reads the catalogue with its lifecycle, the mnestome graph
and the live event list. With DASHBOARD_SCREENSHOTS=folder it saves the
pages there (docs/img/ holds the ones docs/daemon.md shows).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import headless_chromium
from tests.support.cli_process import metnos_env, run
from tests.support.daemon_process import RunningDaemon, daemon, daemon_llm, start_daemon  # noqa: F401 - fixtures
from tests.support.layouts import layout_env
from tests.support.scripted_llm import ScriptedLLM, call, text

pytestmark = pytest.mark.bwrap
SHOTS = os.environ.get("DASHBOARD_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium() as session:
        yield session


def wait(browser: Any, condition: Any, timeout: float = 60) -> Any:
    def settled(driver: Any) -> Any:
        # A list the page draws again while the condition reads it: read it again (Chromium says the node left the document).
        try:
            return condition(driver)
        except WebDriverException as e:
            if isinstance(e, StaleElementReferenceException) or "does not belong to the document" in str(e):
                return False
            raise
    return WebDriverWait(browser, timeout).until(settled)


def shot(browser: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(SHOTS) / f"dashboard-{name}.png"))


def text_of(browser: Any, element_id: str) -> str:
    return browser.find_element(By.ID, element_id).text


def sign_in(browser: Any, daemon: RunningDaemon) -> None:
    """Log in through the form unless the browser already holds this daemon's cookie
    (cookies go by host, not port: the other layout's daemon leaves one with its own token)."""
    browser.get(daemon.url + "/login")
    if any(c["name"] == "metnos_token" and c["value"] == daemon.token for c in browser.get_cookies()):
        return
    browser.find_element(By.ID, "token").send_keys(daemon.token)
    browser.find_element(By.ID, "login").click()
    wait(browser, seen.title_is("Metnos — turns"))


def ask_and_answer_in_another_tab(browser: Any, daemon: RunningDaemon, request: str, button: str, shown: str) -> str:
    """Ask through the form; in a second tab, press ``button`` on the approval; back in the first, the approvals page's text."""
    browser.get(daemon.url + "/")
    browser.find_element(By.ID, "ask-text").send_keys(request)
    browser.find_element(By.ID, "ask-button").click()
    asking = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(daemon.url + "/approvals")
    press = wait(browser, seen.element_to_be_clickable((By.CSS_SELECTOR, f"button.{button}")))
    pending = browser.find_element(By.CSS_SELECTOR, "section.approval").text
    shot(browser, "approvals")
    press.click()
    wait(browser, seen.text_to_be_present_in_element((By.CSS_SELECTOR, "section.approval.answered"), shown))
    browser.close()
    browser.switch_to.window(asking)
    return pending


def test_a_fresh_install_daemon_serves_the_dashboard(tmp_path: Path, browser: Any) -> None:
    """The issue's "done when": after `metnos init`, a plain `metnos daemon` (births run, no model
    installed) serves the dashboard, and the browser gets in with the token it prints."""
    env = metnos_env(layout_env("xdg", tmp_path, os.environ))
    assert run(["init"], env).returncode == 0
    fresh = start_daemon(env, flags=("--tick", "3600"))
    try:
        browser.delete_all_cookies()
        browser.get(fresh.url + "/")
        assert browser.title == "Metnos — log in"
        browser.find_element(By.ID, "token").send_keys(fresh.token)
        browser.find_element(By.ID, "login").click()
        wait(browser, seen.title_is("Metnos — turns"))
        assert "no turn yet" in text_of(browser, "turns")
        browser.get(fresh.url + "/executors")
        assert len(browser.find_elements(By.CSS_SELECTOR, "tr.executor")) >= 13
    finally:
        _, err = fresh.stop()
    assert "Traceback" not in err
    browser.delete_all_cookies()


def test_a_page_without_the_token_is_401_with_the_login_form(daemon: RunningDaemon, browser: Any) -> None:
    assert httpx.get(daemon.url + "/", headers={"Accept": "text/html"}).status_code == 401
    browser.delete_all_cookies()
    browser.get(daemon.url + "/")
    assert browser.title == "Metnos — log in"
    browser.find_element(By.ID, "token").send_keys("not-the-token")
    browser.find_element(By.ID, "login").click()
    # The click submits a form: the error is on the next page, so wait for it rather than look at once.
    wait(browser, seen.text_to_be_present_in_element((By.ID, "login-error"), "not this daemon's token"))
    shot(browser, "login")
    browser.find_element(By.ID, "token").send_keys(daemon.token)
    browser.find_element(By.ID, "login").click()
    wait(browser, seen.title_is("Metnos — turns"))
    # The cookie is HttpOnly: the page's scripts cannot read the token.
    assert browser.execute_script("return document.cookie") == ""


def test_ask_approve_see_the_verdicts_replay_and_undo(daemon: RunningDaemon, browser: Any, daemon_llm: ScriptedLLM) -> None:
    sign_in(browser, daemon)
    target = Path(daemon.env["HOME"]) / "from-the-dashboard.txt"
    daemon_llm.add(call("write_files", {"files": [{"path": str(target), "content": "written from the browser"}]}), text("I wrote the file."))
    pending = ask_and_answer_in_another_tab(browser, daemon, "write from-the-dashboard.txt", "approve", "approved")
    assert "write_files" in pending and str(target) in pending

    wait(browser, seen.text_to_be_present_in_element((By.ID, "ask-result"), "answered: I wrote the file."))
    assert target.read_text() == "written from the browser"
    wait(browser, seen.presence_of_element_located((By.CSS_SELECTOR, "tr.status-answered a")))
    shot(browser, "timeline")
    browser.find_element(By.CSS_SELECTOR, "tr.status-answered a").click()

    # The events table comes after the steps: once it is there, the whole page is.
    wait(browser, seen.presence_of_element_located((By.CSS_SELECTOR, "table.events")))
    step = text_of(browser, "step-1")
    assert "write_files" in step
    assert "vaglio" in step and "approved by http:user" in step and "sandbox" in step and "bwrap" in step
    assert "TurnAnswered" in browser.find_element(By.CSS_SELECTOR, "table.events").text

    browser.find_element(By.ID, "replay").click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, "replay-result"), "same path"))
    browser.find_element(By.ID, "undo-preview").click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, "undo-result"), "would remove"))
    assert str(target) in text_of(browser, "undo-result") and target.exists()
    shot(browser, "turn")
    browser.find_element(By.ID, "undo").click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, "undo-result"), "result: undone"))
    assert not target.exists()


def test_a_declined_step_shows_as_refused(daemon: RunningDaemon, browser: Any, daemon_llm: ScriptedLLM) -> None:
    sign_in(browser, daemon)
    target = Path(daemon.env["HOME"]) / "declined-in-the-browser.txt"
    daemon_llm.add(call("write_files", {"files": [{"path": str(target), "content": "no"}]}), text("I did not write it."))
    ask_and_answer_in_another_tab(browser, daemon, "write declined-in-the-browser.txt", "deny", "denied")
    wait(browser, seen.text_to_be_present_in_element((By.ID, "ask-result"), "refused"))
    assert not target.exists()


def test_an_unverified_answer_is_marked_never_answered(daemon: RunningDaemon, browser: Any, daemon_llm: ScriptedLLM) -> None:
    sign_in(browser, daemon)
    docs = Path(daemon.env["HOME"]) / "unverified-docs"
    docs.mkdir(exist_ok=True)
    for name in ("a.txt", "b.txt"):
        (docs / name).write_text("x")
    wrong = "The files in ~/unverified-docs are a.txt, c.txt and d.txt."
    # The opening read lists the folder; the model answers at once, with files the listing does not hold.
    daemon_llm.add(text(wrong), text(wrong))
    browser.get(daemon.url + "/")
    browser.find_element(By.ID, "ask-text").send_keys("list the files in ~/unverified-docs")
    browser.find_element(By.ID, "ask-button").click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, "ask-result"), "the answer as the model wrote it, unchecked:"))
    shown = text_of(browser, "ask-result").splitlines()
    assert shown[0].startswith("unverified: the answer does not hold up against what the steps returned")
    assert shown[1] == 'not found in anything the steps returned: "c.txt", "d.txt"' and shown[3] == wrong
    link = wait(browser, seen.presence_of_element_located((By.CSS_SELECTOR, "tr.status-unverified a")))
    assert "unverified" == browser.find_element(By.CSS_SELECTOR, "tr.status-unverified .badge").text
    shot(browser, "unverified-timeline")
    link.click()
    wait(browser, seen.presence_of_element_located((By.CSS_SELECTOR, "table.events")))
    assert text_of(browser, "turn-status") == "unverified"
    outcome = text_of(browser, "outcome")
    assert outcome.startswith("Unverified: the answer does not hold up") and "c.txt, d.txt" in outcome and wrong in outcome
    shot(browser, "unverified-turn")


def test_a_turns_question_is_answered_in_its_card_and_the_turn_goes_on(daemon: RunningDaemon, browser: Any, daemon_llm: ScriptedLLM) -> None:
    """Issue 33 item 4: a delete without a target asks; the card's text box answers; the delete still asks approval."""
    sign_in(browser, daemon)
    target = Path(daemon.env["HOME"]) / "old-in-the-browser.txt"
    target.write_text("old\n")
    daemon_llm.add(call("delete_files", {}), text("I deleted it."))
    browser.get(daemon.url + "/")
    browser.find_element(By.ID, "ask-text").send_keys("delete the file I do not need any more")
    browser.find_element(By.ID, "ask-button").click()
    asking = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(daemon.url + "/approvals")
    box = wait(browser, seen.element_to_be_clickable((By.CSS_SELECTOR, "section.dialog form.reply input[name=answer]")))
    card = browser.find_element(By.CSS_SELECTOR, "section.dialog").text
    assert "Which files should I delete?" in card and "delete_files" in card
    shot(browser, "question")
    box.send_keys(str(target))
    browser.find_element(By.CSS_SELECTOR, "section.dialog form.reply button").click()
    wait(browser, seen.text_to_be_present_in_element((By.CSS_SELECTOR, "section.dialog.answered"), "answered"))
    assert target.exists()  # the answer names the target; the approval is still to come
    wait(browser, seen.element_to_be_clickable((By.CSS_SELECTOR, "button.approve"))).click()
    wait(browser, seen.text_to_be_present_in_element((By.CSS_SELECTOR, "section.approval.answered"), "approved"))
    browser.close()
    browser.switch_to.window(asking)
    wait(browser, seen.text_to_be_present_in_element((By.ID, "ask-result"), "answered: I deleted it."))
    assert not target.exists()
    # The turn's page says what was asked and what the user answered (the newest turn is first).
    browser.get(daemon.url + "/")
    browser.find_element(By.CSS_SELECTOR, "tr.status-answered a").click()
    wait(browser, seen.presence_of_element_located((By.CSS_SELECTOR, "table.events")))
    step = text_of(browser, "step-1")
    assert "asked" in step and "Which files should I delete?" in step and f"“{target}” (http:user)" in step, step


def test_schedules_pause_and_resume(daemon: RunningDaemon, browser: Any) -> None:
    sign_in(browser, daemon)
    browser.get(daemon.url + "/schedules")
    shot(browser, "schedules")
    first = browser.find_element(By.CSS_SELECTOR, "button.schedule[data-command=pause]")
    schedule_id = first.get_attribute("data-id")
    first.click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, f"schedule-{schedule_id}"), "paused"))
    browser.find_element(By.CSS_SELECTOR, f"button.schedule[data-id='{schedule_id}'][data-command=resume]").click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, f"schedule-{schedule_id}"), "active"))


def test_a_schedule_in_words_is_read_back_then_created(daemon: RunningDaemon, browser: Any) -> None:
    sign_in(browser, daemon)
    browser.get(daemon.url + "/schedules")
    form = browser.find_element(By.ID, "schedule-new")
    form.find_element(By.NAME, "when").send_keys("every other Tuesday at 18:30")
    form.find_element(By.NAME, "executor").send_keys("get_now")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, "schedule-reading"), "next firings"))
    reading = text_of(browser, "schedule-reading")
    assert "reads as cron 30 18 * * 2 /2w@" in reading and reading.count(" 18:30 UTC") == 3, reading
    assert "/2w@" not in browser.find_element(By.ID, "schedules").text
    browser.find_element(By.ID, "schedule-create").click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, "schedules"), "/2w@"))
    shot(browser, "schedule-in-words")


def test_the_catalogue_with_its_lifecycle(daemon: RunningDaemon, browser: Any) -> None:
    sign_in(browser, daemon)
    browser.get(daemon.url + "/executors")
    rows = {r.find_elements(By.TAG_NAME, "td")[0].text: r.text for r in browser.find_elements(By.CSS_SELECTOR, "tr.executor")}
    assert {"get_now", "write_files", "read_files"} <= set(rows) and "active" in rows["get_now"]
    shot(browser, "executors")
    browser.find_element(By.LINK_TEXT, "get_now").click()
    lifecycle = wait(browser, seen.presence_of_element_located((By.ID, "lifecycle"))).text
    assert "ExecutorRegistered" in lifecycle and "ExecutorActivated" in lifecycle


def test_an_unknown_turn_is_a_page_naming_it(daemon: RunningDaemon, browser: Any) -> None:
    sign_in(browser, daemon)
    browser.get(daemon.url + "/turns/ffffffff")
    assert "no turn starts with 'ffffffff'" in text_of(browser, "error")
    with httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {daemon.token}"}) as client:
        assert client.get("/turns/ffffffff").status_code == 404


def test_the_mnestome_graph(daemon: RunningDaemon, browser: Any) -> None:
    sign_in(browser, daemon)
    browser.get(daemon.url + "/mnestome")
    graph = browser.find_element(By.ID, "mnestome-graph")
    assert len(graph.find_elements(By.TAG_NAME, "line")) >= 41
    assert "find_files" in graph.text and "read_files" in graph.text
    shot(browser, "mnestome")


def test_the_event_list_is_live(daemon: RunningDaemon, browser: Any, daemon_llm: ScriptedLLM) -> None:
    sign_in(browser, daemon)
    browser.get(daemon.url + "/events")
    wait(browser, seen.text_to_be_present_in_element((By.ID, "stream-state"), "live"))
    # The page starts with the last 50 events: only rows after the log's end now are the new turn's.
    before = daemon.last_event_id()
    wait(browser, lambda b: max((int(r.find_elements(By.TAG_NAME, "td")[0].text) for r in b.find_elements(By.CSS_SELECTOR, "tr.event")), default=0) >= before)
    daemon_llm.add(text("Hello from the event page."))
    with httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {daemon.token}"}, timeout=120) as client:
        assert client.post("/api/ask", json={"text": "say hello"}).json()["status"] == "answered"

    def new_kinds(b: Any) -> list[str]:
        rows = [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in b.find_elements(By.CSS_SELECTOR, "tr.event")]
        return [cells[2] for cells in rows if int(cells[0]) > before]

    wait(browser, lambda b: "TurnAnswered" in new_kinds(b))
    assert "TurnStarted" in new_kinds(browser)
    shot(browser, "events")


def test_a_replay_that_diverges_shows_the_two_events_side_by_side(daemon: RunningDaemon, browser: Any, daemon_llm: ScriptedLLM) -> None:
    from uuid import UUID

    from domain.turn import Turn
    from metnos.mechanisms.eventlog import EventLog
    from metnos.mechanisms.store.records import encode_event
    from tests.support.log_surgery import positions, replace_record
    from metnos.settings.workspace import Workspace

    notes = Path(daemon.env["HOME"]) / "replayed-notes.md"
    notes.write_text("the notes\n")
    daemon_llm.add(call("read_files", {"paths": [str(notes)]}), text("The notes say: the notes."))
    with daemon.client() as client:
        done = client.post("/api/ask", json={"text": "read replayed-notes.md", "approve": "yes"}, timeout=120).json()
    assert done["status"] == "answered", done
    turn_id = done["turn_id"]

    # The model's reply edited in the log after the turn (another path): a replay now takes another path from there.
    log = EventLog(Workspace.from_env(daemon.env))
    try:
        recorder = log.recorder

        def edit(txn: Any) -> None:
            event = next(e for e in log.events.get(UUID(turn_id)) if isinstance(e, Turn.LLMReplied) and e.reply.get("tool_calls"))
            reply = dict(event.reply)
            reply["tool_calls"] = [{**reply["tool_calls"][0], "arguments": {"paths": ["~/edited-afterwards.md"]}}]
            edited = Turn.LLMReplied(originator_id=event.originator_id, originator_version=event.originator_version,
                                     timestamp=event.timestamp, round=event.round, reply=reply, intent_ms=event.intent_ms)
            position = positions(txn, recorder, UUID(turn_id))[event.originator_version - 1]
            replace_record(txn, recorder, position, encode_event(log.mapper.to_stored_event(edited)))

        recorder.shared.write(edit)
    finally:
        log.close()

    sign_in(browser, daemon)
    browser.get(f"{daemon.url}/turns/{turn_id}")
    browser.find_element(By.ID, "replay").click()
    wait(browser, seen.text_to_be_present_in_element((By.ID, "replay-result"), "diverged"))
    table = wait(browser, seen.visibility_of_element_located((By.ID, "replay-diff")))
    shot(browser, "replay-diff")
    headings = [th.text for th in table.find_elements(By.TAG_NAME, "th")]
    recorded, replayed = browser.find_element(By.ID, "replay-recorded"), browser.find_element(By.ID, "replay-replayed")
    assert headings == ["recorded", "replayed"]
    # Side by side: one row, the log's event on the left, the replay's on the right, each saying its path.
    assert recorded.location["y"] == replayed.location["y"] and recorded.location["x"] < replayed.location["x"], (
        recorded.location, replayed.location)
    assert str(notes) in recorded.text and "edited-afterwards.md" not in recorded.text, recorded.text
    assert "edited-afterwards.md" in replayed.text and str(notes) not in replayed.text, replayed.text
