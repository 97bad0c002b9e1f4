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

