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
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from tests.integration.test_side_effect_gate import events_of, kind
from tests.support.scripted_llm import ScriptedLLM, call, text


@pytest.fixture
def layout() -> str:
    # The dialog does not depend on where the workspace is: one layout is enough.
    return "xdg"


class _Terminal(io.StringIO):
    """Standard input as a terminal, so `metnos ask` prompts."""

    def isatty(self) -> bool:
        return True


def ask(capsys, monkeypatch, script: list, *argv: str) -> tuple[int, dict, ScriptedLLM]:
    with ScriptedLLM(script) as llm:
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
    code, out, llm = ask(capsys, monkeypatch, [call("send_messages", {}), call("send_messages", message), text("I told lucia.")],
                         "send the message", "--yes")
    assert code == 0 and out["status"] == "answered", out
    shown = [m for m in llm.requests[1].messages if m["role"] == "tool"][-1]["content"]
    assert "lucia: back at seven" in shown and "user answer" in shown, shown
    events = events_of(capsys, out["turn_id"])
    [asked] = [e["state"] for e in events if kind(e) == "DialogAsked"]
    assert asked["executor"] == "send_messages" and asked["argument"] == "" and asked["question"] == "Which messages should I send?"
    assert [e["state"]["executor"] for e in events if kind(e) == "StepInvoked"] == ["send_messages"]
    replays_exactly(capsys, out["turn_id"])


def test_get_location_gives_the_configured_place(home: Path, capsys, monkeypatch) -> None:
    from metnos.settings.workspace import Workspace

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
