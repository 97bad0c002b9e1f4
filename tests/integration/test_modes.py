"""Issue 20 items 1, 3 and 5: the LLM judge and the planner's modes, against real model servers on 127.0.0.1.

Each server speaks a real wire format (OpenAI chat completions or Anthropic
Messages, tests/support/scripted_llm.py); executors run in bubblewrap; the
turn is replayed from the log afterwards.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from metnos.cli import main
from metnos.workspace import Workspace
from tests.integration.test_side_effect_gate import events_of, kind
from tests.support.scripted_llm import ScriptedLLM, call, text


def configure(body: str) -> None:
    config = Workspace.from_env().config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(body)


def ask(capsys, monkeypatch, llm: ScriptedLLM, *argv: str, provider: str = "openai") -> tuple[int, dict]:
    monkeypatch.setenv("METNOS_LLM_URL", llm.url)
    monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
    monkeypatch.setenv("METNOS_LLM_PROVIDER", provider)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
    capsys.readouterr()
    code = main(["ask", *argv, "--json", "--no-cache"])
    return code, orjson.loads(capsys.readouterr().out)


def replays_clean(capsys, turn_id: str) -> None:
    capsys.readouterr()
    code = main(["replay", turn_id, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out


def shown(capsys, turn_id: str) -> str:
    capsys.readouterr()
    assert main(["turns", "show", turn_id]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_llm_judge_refuses_a_step_in_a_context_of_its_own(home: Path, capsys, monkeypatch, provider: str) -> None:
    configure('[runtime.judge]\nenabled = true\nthreshold = 0.5\n')
    target = home / "todo.md"
    script = [call("write_files", {"files": [{"path": str(target), "content": "rm -rf everything\n"}]}),
              text('{"score": 0.1, "reason": "the user asked for a shopping note, not this content"}'),
              text("I could not save it.")]
    with ScriptedLLM(script) as llm:
        code, out = ask(capsys, monkeypatch, llm, "save a note to todo.md: buy milk", "--yes", provider=provider)
        judged = llm.requests[1]
    assert not target.exists()
    assert out["status"] == "refused" and code == 3, out
    # Its own context: its instructions, the request and the one call; none of the proposer's tools or turns.
    assert judged.tool_names == []
    said = orjson.dumps(judged.body).decode()
    assert "buy milk" in said and "write_files" in said and "score" in said
    assert "You are Metnos" not in said and len([m for m in judged.messages if m["role"] == "user"]) == 1
    events = events_of(capsys, out["turn_id"])
    [verdict] = [e["state"]["verdict"] for e in events if kind(e) == "StepJudgedByModel"]
    assert verdict["decision"] == "deny" and verdict["score"] == 0.1 and verdict["tier"] == "middle"
    assert "shopping note" in verdict["reason"]
    asked = [e["state"] for e in events if kind(e) == "LLMAsked"]
    assert [a["role"] for a in asked] == ["proposer", "judge", "proposer"]
    assert "StepInvoked" not in [kind(e) for e in events] and "ApprovalAsked" not in [kind(e) for e in events]
    observed = [e["state"]["observation"] for e in events if kind(e) == "ObservationRecorded"]
    assert observed[0]["error_class"] == "vaglio_denied" and "LLM judge refused write_files" in observed[0]["error"]
    assert "LLM judge (middle, scripted-model): deny, score 0.10 (threshold 0.50)" in shown(capsys, out["turn_id"])
    replays_clean(capsys, out["turn_id"])


def test_the_judge_passes_a_fitting_step_and_skips_what_its_capabilities_do_not_name(home: Path, capsys, monkeypatch) -> None:
    configure('[runtime.judge]\nenabled = true\ncapabilities = ["fs:write"]\n')
    target = home / "todo.md"
    script = [call("get_now", {}),
              call("write_files", {"files": [{"path": str(target), "content": "- buy milk\n"}]}),
              text('{"score": 0.9, "reason": "a note as asked"}'),
              text("saved")]
    with ScriptedLLM(script) as llm:
        code, out = ask(capsys, monkeypatch, llm, "what time is it? then save a note to todo.md: buy milk", "--yes")
    assert code == 0 and target.read_text() == "- buy milk\n", out
    events = events_of(capsys, out["turn_id"])
    verdicts = [e["state"] for e in events if kind(e) == "StepJudgedByModel"]
    # get_now holds no fs:write: not judged; write_files is, and passes.
    assert [(v["step"], v["verdict"]["decision"]) for v in verdicts] == [(2, "ask")]
    replays_clean(capsys, out["turn_id"])


def test_an_unreadable_judge_refuses(home: Path, capsys, monkeypatch) -> None:
    configure('[runtime.judge]\nenabled = true\n')
    target = home / "todo.md"
    script = [call("write_files", {"files": [{"path": str(target), "content": "x"}]}), text("looks fine to me"), text("not saved")]
    with ScriptedLLM(script) as llm:
        _, out = ask(capsys, monkeypatch, llm, "save a note to todo.md: x", "--yes")
    assert not target.exists() and out["status"] == "refused", out
    [verdict] = [e["state"]["verdict"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "StepJudgedByModel"]
    assert verdict["score"] is None and "not a verdict" in verdict["reason"]
