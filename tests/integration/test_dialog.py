"""Issue 33 item 4: the atomic dialog of seeds/002 (get_inputs, request_location_from_user) on every way in.

A call with side effects that names no target is never given a made-up one:
the turn asks the user on its channel (``DialogAsked``), waits, and the answer
(``DialogAnswered``) becomes the call's argument, with provenance "user answer";
the call then goes through the vaglio and the approval like any other. Asked
at the terminal, over the daemon's API and through Telegram's stand-in; a turn
with nobody to answer ends needs_input, saying how to give the answer; every
such turn replays exactly from the log.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.integration.test_side_effect_gate import events_of, kind
from tests.integration.test_telegram_channel import ALLOWED, _buttons, _channel, _events, bot  # noqa: F401 - bot is a fixture
from tests.support.cli_process import metnos_env, run, wait_for
from tests.support.daemon_process import RunningDaemon, start_daemon
from tests.support.fake_telegram import FakeBotAPI
from tests.support.layouts import layout_env
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.support.workspace_template import initialise

pytestmark = pytest.mark.bwrap


@pytest.fixture
def layout() -> str:
    # The dialog does not depend on where the workspace is: one layout is enough.
    return "xdg"


class _Terminal(io.StringIO):
    """Standard input as a terminal, so `metnos ask` prompts."""

    def isatty(self) -> bool:
        return True


def ask(capsys, monkeypatch, script: list, *argv: str, llama_cpp: bool | None = None) -> tuple[int, dict, ScriptedLLM]:
    with ScriptedLLM(script, llama_cpp=llama_cpp) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        code = main(["ask", *argv, "--json", "--no-cache"])
        out = orjson.loads(capsys.readouterr().out)
    return code, out, llm


def replays_exactly(capsys, turn_id: str) -> None:
    capsys.readouterr()
    code = main(["replay", turn_id, "--json"])
    report = capsys.readouterr().out
    assert code == 0, report
    shown = orjson.loads(report)
    assert shown["diverged"] == 0 and [r["same_path"] for r in shown["results"]] == [True], report


def test_a_delete_without_a_target_asks_at_the_terminal_and_deletes_what_the_user_names(home: Path, capsys, monkeypatch) -> None:
    (home / "old.txt").write_text("old\n")
    (home / "keep.txt").write_text("keep\n")
    prompts: list[str] = []

    def answer(prompt: str) -> str:
        prompts.append(prompt)
        return "~/old.txt"

    monkeypatch.setattr("sys.stdin", _Terminal())
    monkeypatch.setattr("builtins.input", answer)
    code, out, _ = ask(capsys, monkeypatch, [call("delete_files", {}), text("I deleted ~/old.txt.")],
                       "delete the file I do not need any more", "--yes")
    assert code == 0 and out["status"] == "answered", out
    assert prompts == ["  answer: "]
    assert not (home / "old.txt").exists() and (home / "keep.txt").exists()
    events = events_of(capsys, out["turn_id"])
    [asked] = [e["state"] for e in events if kind(e) == "DialogAsked"]
    [answered] = [e["state"] for e in events if kind(e) == "DialogAnswered"]
    assert asked == {"step": 1, "channel": "cli", "tool": "get_inputs", "question": "Which files should I delete?",
                     "executor": "delete_files", "argument": "paths"}
    assert answered == {"step": 1, "channel": "cli", "answered": True, "answer": "~/old.txt", "by": "user:prompt"}
    [resolved] = [e["state"] for e in events if kind(e) == "StepResolved"]
    assert resolved["args"]["paths"] == ["~/old.txt"] and resolved["completed"]["paths"] == "user answer"
    kinds = [kind(e) for e in events]
    # Asked before anything ran; the answer is not the approval: the delete still asks for that.
    assert kinds.index("DialogAnswered") < kinds.index("ApprovalAsked") < kinds.index("StepInvoked")
    replays_exactly(capsys, out["turn_id"])



def test_without_a_terminal_the_turn_ends_needs_input_saying_how_to_give_it(home: Path, capsys, monkeypatch) -> None:
    (home / "old.txt").write_text("old\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal: nobody to ask
    code, out, llm = ask(capsys, monkeypatch, [call("delete_files", {}), text("deleted")], "delete the file I do not need any more", "--yes")
    assert code == 4 and out["status"] == "needs_input", out
    message = out["failure"]["message"]
    assert "Which files should I delete?" in message and "no terminal" in message and "naming it in the request" in message, message
    assert (home / "old.txt").exists() and len(llm.requests) == 1  # nothing ran, the model was not asked again
    events = events_of(capsys, out["turn_id"])
    [answered] = [e["state"] for e in events if kind(e) == "DialogAnswered"]
    assert answered == {"step": 1, "channel": "cli", "answered": False, "answer": None, "by": "no-terminal"}
    assert "StepInvoked" not in [kind(e) for e in events]
    replays_exactly(capsys, out["turn_id"])


def test_a_call_whose_target_is_a_message_gets_the_answer_back_for_the_model(home: Path, capsys, monkeypatch) -> None:
    """send_messages' target is a list of messages (recipient and body): the answer is no argument
    of its own, so it goes back to the model, which calls again with it."""
    monkeypatch.setattr("sys.stdin", _Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt: "lucia: back at seven")
    message = {"messages": [{"to_user": "lucia", "body": "back at seven"}]}
    # A model without llama.cpp's grammar (which requires messages) may send the call bare.
    code, out, llm = ask(capsys, monkeypatch, [call("send_messages", {}), call("send_messages", message), text("I told lucia.")],
                         "send the message", "--yes", llama_cpp=False)
    assert code == 0 and out["status"] == "answered", out
    shown = [m for m in llm.requests[1].messages if m["role"] == "tool"][-1]["content"]
    assert "lucia: back at seven" in shown and "user answer" in shown, shown
    events = events_of(capsys, out["turn_id"])
    [asked] = [e["state"] for e in events if kind(e) == "DialogAsked"]
    assert asked["executor"] == "send_messages" and asked["argument"] == "" and asked["question"] == "Which messages should I send?"
    assert [e["state"]["executor"] for e in events if kind(e) == "StepInvoked"] == ["send_messages"]
    replays_exactly(capsys, out["turn_id"])


def test_get_location_gives_the_configured_place(home: Path, capsys, monkeypatch) -> None:
    Workspace.from_env().config_file.write_text('[location]\nname = "Milan, Italy"\nlat = 45.4642\nlon = 9.19\n')
    code, out, llm = ask(capsys, monkeypatch, [call("get_location", {}), text("You are in Milan, Italy.")], "what is my location?")
    assert code == 0 and out["answer"] == "You are in Milan, Italy.", out
    assert "get_location" in llm.requests[0].tool_names
    shown = [m for m in llm.requests[1].messages if m["role"] == "tool"][-1]["content"]
    assert "Milan, Italy" in shown and "45.4642" in shown


def test_without_a_location_the_planner_asks_the_user_for_it(home: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("sys.stdin", _Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt: "Bologna")
    script = [call("get_location", {}), call("request_location_from_user", {}), text("You are in Bologna: search for a pharmacy there.")]
    code, out, llm = ask(capsys, monkeypatch, script, "where is the nearest pharmacy?")
    assert code == 0 and out["status"] == "answered", out
    # Both are offered for a location-relative request.
    assert {"get_location", "request_location_from_user"} <= set(llm.requests[0].tool_names)
    first = [m for m in llm.requests[1].messages if m["role"] == "tool"][-1]["content"]
    assert "NoLocation" in first and "request_location_from_user" in first, first
    second = [m for m in llm.requests[2].messages if m["role"] == "tool"][-1]["content"]
    assert "Bologna" in second and "user answer" in second and "[location]" in second, second
    events = events_of(capsys, out["turn_id"])
    [asked] = [e["state"] for e in events if kind(e) == "DialogAsked"]
    assert asked["tool"] == "request_location_from_user" and asked["step"] == 2 and asked["question"].startswith("Where are you?")
    [called] = [e["state"] for e in events if kind(e) == "BuiltinCalled"]
    assert called["name"] == "request_location_from_user" and called["observation"]["location"] == {"name": "Bologna"}
    replays_exactly(capsys, out["turn_id"])


def test_a_replay_that_is_not_answered_the_same_diverges_at_the_question(home: Path, capsys, monkeypatch) -> None:
    """The answer comes from the log: the recorded turn, replayed by code that asks elsewhere, says where the paths parted."""
    monkeypatch.setattr("sys.stdin", _Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt: "Bologna")
    script = [call("request_location_from_user", {}), text("You are in Bologna.")]
    code, out, _ = ask(capsys, monkeypatch, script, "where is the nearest pharmacy?")
    assert code == 0, out
    from replay.ports import RecordedPorts

    monkeypatch.setattr(RecordedPorts, "can_ask", lambda self: False)
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) != 0
    assert orjson.loads(capsys.readouterr().out)["diverged"] == 1


# Through the daemon's API -----------------------------------------------------------------
@pytest.fixture(scope="module")
def dialog_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningDaemon, ScriptedLLM]]:
    """A daemon whose questions wait DAEMON_WAIT_S ([daemon] approval_timeout_s) for an answer."""
    root = tmp_path_factory.mktemp("dialog-daemon")
    with ScriptedLLM() as llm:
        env = metnos_env(layout_env("xdg", root, os.environ), METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
        initialise(env)
        Workspace.from_env(env).config_file.write_text(f"[daemon]\napproval_timeout_s = {DAEMON_WAIT_S}\n")
        running = start_daemon(env)
        try:
            yield running, llm
        finally:
            running.stop()


DAEMON_WAIT_S = 8


def ask_in_a_thread(client: Any, request: str, result: dict) -> threading.Thread:
    asking = threading.Thread(target=lambda: result.update(client.post("/api/ask", json={"text": request, "approve": "yes"}).json()))
    asking.start()
    return asking


def test_a_question_waits_at_the_api_and_its_answer_resumes_the_turn(dialog_daemon: tuple[RunningDaemon, ScriptedLLM]) -> None:
    daemon, llm = dialog_daemon
    target = Path(daemon.env["HOME"]) / "old-from-http.txt"
    target.write_text("old\n")
    llm.add(call("delete_files", {}), text("I deleted it."))
    result: dict = {}
    with daemon.client() as client:
        asking = ask_in_a_thread(client, "delete the file I do not need any more", result)
        [pending] = wait_for(lambda: client.get("/api/dialogs").json(), timeout=60, what="the question to be pending")
        assert (pending["step"], pending["tool"], pending["channel"], pending["executor"], pending["argument"]) == (
            1, "get_inputs", "http", "delete_files", "paths")
        assert pending["question"] == "Which files should I delete?" and 0 < pending["seconds_left"] <= DAEMON_WAIT_S
        assert target.exists()  # nothing ran while it waited
        empty = client.post(f"/api/dialogs/{pending['id']}", json={"answer": "  "})
        assert empty.status_code == 400 and "empty" in empty.json()["error"]["message"]
        assert client.post(f"/api/dialogs/{pending['id']}", json={"answer": "~/old-from-http.txt"}).json() == {"id": pending["id"], "answered": True}
        asking.join(timeout=60)
        assert result["status"] == "answered", result
        assert not target.exists()
        # Answered once: a second answer is refused, naming where the first came from (one inbox).
        again = client.post(f"/api/dialogs/{pending['id']}", json={"answer": "again"})
        assert again.status_code == 409 and "already answered on http (http:user)" in again.json()["error"]["message"], again.text
        assert client.get("/api/dialogs").json() == []
        events = client.get(f"/api/turns/{result['turn_id']}").json()["events"]
        [answered] = [e["state"] for e in events if e["type"] == "DialogAnswered"]
        assert answered == {"step": 1, "channel": "http", "answered": True, "answer": "~/old-from-http.txt", "by": "http:user"}
        replayed = client.post(f"/api/turns/{result['turn_id']}/replay").json()
        assert replayed["same_path"] is True and replayed["diff"] == ""


def test_a_question_left_unanswered_times_out_with_a_clear_status(dialog_daemon: tuple[RunningDaemon, ScriptedLLM]) -> None:
    daemon, llm = dialog_daemon
    target = Path(daemon.env["HOME"]) / "kept-by-http.txt"
    target.write_text("kept\n")
    llm.add(call("delete_files", {}), text("I deleted it."))
    result: dict = {}
    with daemon.client() as client:
        asking = ask_in_a_thread(client, "delete the file I do not need any more", result)
        wait_for(lambda: client.get("/api/dialogs").json(), timeout=60, what="the question to be pending")
        asking.join(timeout=DAEMON_WAIT_S + 60)
        assert result["status"] == "needs_input", result
        assert "Which files should I delete?" in result["message"] and "nobody answered on http in time" in result["message"]
        assert target.exists()
        events = client.get(f"/api/turns/{result['turn_id']}").json()["events"]
        [answered] = [e["state"] for e in events if e["type"] == "DialogAnswered"]
        assert (answered["answered"], answered["by"]) == (False, "http:timeout")
        assert not [e for e in events if e["type"] == "StepInvoked"]
        assert client.post(f"/api/turns/{result['turn_id']}/replay").json()["same_path"] is True


# Through Telegram (its stand-in Bot API) ------------------------------------------------------
def test_in_telegram_the_question_is_a_message_and_the_next_reply_answers_it(bot: FakeBotAPI, home: Path, monkeypatch) -> None:
    (home / "old.txt").write_text("old\n")
    with ScriptedLLM([call("delete_files", {}), text("I deleted ~/old.txt.")]) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120)
        try:
            bot.user_says(ALLOWED, "delete the file I do not need any more")
            question = bot.wait_for("sendMessage", lambda p: "Which files should I delete?" in p["text"])
            assert question.params["chat_id"] == ALLOWED and "reply_markup" not in question.params
            assert (home / "old.txt").exists()
            bot.user_says(ALLOWED, "~/old.txt")
            approval = bot.wait_for("sendMessage", lambda p: "reply_markup" in p)
            assert "delete_files" in approval.params["text"] and "~/old.txt" in approval.params["text"]
            bot.press(approval.result, _buttons(approval.params)[0]["callback_data"])
            bot.wait_for("sendMessage", lambda p: p["text"] == "I deleted ~/old.txt.")
        finally:
            channel.stop()
    assert not (home / "old.txt").exists()
    runtime.refresh()
    events = _events(runtime)
    # The reply answered the question: it started no turn of its own.
    assert [e.text for name, e in events if name == "TurnStarted"] == ["delete the file I do not need any more"]
    [answered] = [e for name, e in events if name == "DialogAnswered"]
    assert (answered.channel, answered.answer, answered.by) == ("telegram", "~/old.txt", "telegram:reply")
    turn_id = str(answered.originator_id)
    runtime.close()
    replays_exactly_from_a_process(turn_id)


def test_in_telegram_an_unanswered_question_times_out_and_the_chat_is_told(bot: FakeBotAPI, home: Path, monkeypatch) -> None:
    (home / "old.txt").write_text("old\n")
    with ScriptedLLM([call("delete_files", {}), text("deleted")]) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=1.5)
        try:
            bot.user_says(ALLOWED, "delete the file I do not need any more")
            bot.wait_for("sendMessage", lambda p: "Which files should I delete?" in p["text"])
            bot.wait_for("sendMessage", lambda p: p["text"].startswith("No answer in"))
            told = bot.wait_for("sendMessage", lambda p: p["text"].startswith("metnos:") or "need more information" in p["text"])
        finally:
            channel.stop()
    assert "Which files should I delete?" in told.params["text"] and "nobody answered on telegram in time" in told.params["text"]
    assert (home / "old.txt").exists()
    runtime.refresh()
    events = _events(runtime)
    [answered] = [e for name, e in events if name == "DialogAnswered"]
    assert (answered.answered, answered.by) == (False, "telegram:timeout")
    [failed] = [e for name, e in events if name == "TurnFailed"]
    assert failed.status == "needs_input"
    runtime.close()


def replays_exactly_from_a_process(turn_id: str) -> None:
    done = run(["replay", turn_id, "--json"], metnos_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["same_path"] for r in orjson.loads(done.stdout)["results"]] == [True]
