"""Issue 5 end to end: turns through the CLI against a scripted model on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from metnos.cli import main
from tests.support.scripted_llm import ScriptedLLM, call, text


@pytest.fixture
def home(metnos_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user_home = tmp_path / "user"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    assert main(["init"]) == 0
    return user_home


def ask(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["ask", *argv, "--json"])
    return code, orjson.loads(capsys.readouterr().out)


def turn_events(capsys, turn_id: str) -> list[dict]:
    capsys.readouterr()
    main(["events", "--json", "--aggregate", turn_id])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_read_a_file_and_answer(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "diary.md").write_text("monday\ntuesday\nwednesday\nthursday\n")
    with ScriptedLLM([call("read_files", {"paths": ["~/notes/diary.md"]}), text("tuesday, wednesday, thursday")], dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, "read ~/notes/diary.md and tell me the last three lines")
        assert code == 0, out
        assert out["answer"] == "tuesday, wednesday, thursday"
        second = llm.requests[1].body
        tool_msg = [m for m in second["messages"] if m["role"] == "tool"][0]
        assert "thursday" in tool_msg["content"]
        assert "read_files" in [t["function"]["name"] for t in llm.requests[0].body["tools"]]
    kinds = [e["topic"].rsplit(".", 1)[-1] for e in turn_events(capsys, out["turn_id"])]
    assert kinds[:3] == ["TurnStarted", "CatalogueResolved", "PrefilterRanked"]
    for expected in ("LLMAsked", "LLMReplied", "StepProposed", "StepResolved", "StepJudged", "StepInvoked", "ObservationRecorded", "TurnAnswered"):
        assert expected in kinds
