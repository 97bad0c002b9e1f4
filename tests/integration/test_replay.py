"""Issue 6: replaying turns from the log, divergence reports, and rebuilds."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.support.scripted_llm import ScriptedLLM, call, text


@pytest.fixture
def home(home: Path) -> Path:
    (home / "notes.md").write_text("alpha\nbeta\ngamma\n")
    return home



@pytest.fixture(autouse=True)
def _model_made_steps(monkeypatch) -> None:
    """These tests edit and replay the steps the model proposed; opening reads
    (replayed in test_turn_opening_reads.py) would shift their numbers."""
    monkeypatch.setenv("METNOS_OPENING_READS", "0")

def ask(capsys, monkeypatch, script, *argv: str) -> dict:
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        main(["ask", *argv, "--json"])
        return orjson.loads(capsys.readouterr().out)


def replay(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["replay", *argv, "--json"])
    return code, orjson.loads(capsys.readouterr().out)


def log_size() -> int:
    from metnos.mechanisms.eventlog import EventLog

    log = EventLog(Workspace.from_env())
    try:
        return log.recorder.max_notification_id() or 0
    finally:
        log.close()


READ = [call("read_files", {"paths": ["~/notes.md"]}), text("alpha, beta, gamma")]


def test_an_unchanged_log_replays_clean_and_replay_changes_nothing(home: Path, capsys, monkeypatch) -> None:
    ask(capsys, monkeypatch, READ, "read ~/notes.md")
    ask(capsys, monkeypatch, [call("write_files", {"files": [{"path": "~/out.txt", "content": "{{step0.x}}"}]}), text("no")], "write out", "--yes")
    ask(capsys, monkeypatch, [call("find_files", {"base_path": "~", "pattern": "*.md"}), call("describe_entries", {"from_step": 1}), text("notes.md")], "find my markdown files and describe them")
    ask(capsys, monkeypatch, [call("write_files", {"files": [{"path": "~/out.txt", "content": "x"}]}), text("done")], "write x to out", "--yes")
    before = log_size()
    (home / "out.txt").write_text("changed since")
    code, out = replay(capsys, "--all")
    assert code == 0, out
    assert out["turns"] == 4 and out["diverged"] == 0
    # Nothing was executed, written or recorded.
    assert (home / "out.txt").read_text() == "changed since"
    assert log_size() == before


def test_a_changed_judge_threshold_diverges_at_the_judgement(home: Path, capsys, monkeypatch) -> None:
    out = ask(capsys, monkeypatch, READ, "read ~/notes.md")
    monkeypatch.setenv("METNOS_JUDGE_THRESHOLD", "0.95")
    code, result = replay(capsys, out["turn_id"][:8])
    assert code == 1
    d = result["results"][0]["divergence"]
    assert d["expected"]["type"] == "StepJudged" and d["step"] == 1
    assert d["found"]["state"]["verdict"]["decision"] == "deny"
    assert d["changed"]["settings"]["judge_threshold"] == {"recorded": 0.3, "now": 0.95}


def test_a_changed_prefilter_pool_diverges_at_the_ranking(home: Path, capsys, monkeypatch) -> None:
    out = ask(capsys, monkeypatch, [call("find_files", {"base_path": "~", "pattern": "*.md"}), text("notes.md")], "find the markdown files in my home folder")
    monkeypatch.setenv("METNOS_ENGINE_POOL_SIZE", "1")
    code, result = replay(capsys, out["turn_id"])
    assert code == 1
    d = result["results"][0]["divergence"]
    assert d["expected"]["type"] == "PrefilterRanked" and d["position"] == 3


def test_an_executor_replaced_by_a_new_version_diverges_where_it_runs(home: Path, capsys, monkeypatch) -> None:
    out = ask(capsys, monkeypatch, READ, "read ~/notes.md")
    ws = Workspace.from_env()
    name_dir = ws.executors_origin_dir("seed") / "read_files"
    new = name_dir / "2.0.0"
    shutil.copytree(name_dir / "1.0.0", new)
    manifest = new / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('version = "1.0.0"', 'version = "2.0.0"', 1))
    assert main(["executors", "sign", str(new)]) == 0
    assert main(["executors", "list"]) == 0  # boot registers and activates 2.0.0
    assert main(["executors", "promote", "read_files", "2.0.0"]) == 0
    code, result = replay(capsys, out["turn_id"])
    assert code == 1
    d = result["results"][0]["divergence"]
    assert d["expected"]["type"] == "StepInvoked" and d["step"] == 1
    assert d["changed"]["fields"]["version"] == {"recorded": "1.0.0", "now": "2.0.0"}
    assert d["changed"]["executors"]["read_files"]["now"][0] == "2.0.0"


def _edit_recorded_reply(workspace: Workspace, turn_id: str, new_args: dict) -> None:
    """Rewrite, in place, the first recorded model reply of a turn (on a copy of the log)."""
    from uuid import UUID

    from domain.turn import Turn
    from metnos.mechanisms.eventlog import EventLog
    from metnos.mechanisms.store.records import encode_event
    from tests.support.log_surgery import replace_record

    log = EventLog(workspace)
    try:
        for n in log.notifications():
            if n.originator_id != UUID(turn_id) or not n.topic.endswith("LLMReplied"):
                continue
            event = log.mapper.to_domain_event(n)
            reply = dict(event.reply)
            reply["tool_calls"] = [{**reply["tool_calls"][0], "arguments": new_args}]
            edited = Turn.LLMReplied(originator_id=event.originator_id, originator_version=event.originator_version,
                                     timestamp=event.timestamp, round=event.round, reply=reply, intent_ms=event.intent_ms)
            stored = log.mapper.to_stored_event(edited)
            recorder = log.recorder
            recorder.shared.write(lambda txn: replace_record(txn, recorder, n.id, encode_event(stored)))
            return
    finally:
        log.close()
    raise AssertionError("no LLMReplied event found")


def test_a_model_reply_edited_in_a_copy_of_the_log_diverges_at_the_proposal(home: Path, capsys, monkeypatch, tmp_path) -> None:
    out = ask(capsys, monkeypatch, READ, "read ~/notes.md")
    original = Workspace.from_env()
    copy = tmp_path / "copy"  # a METNOS_HOME, whatever the layout of the original
    shutil.copytree(original.data_dir, copy / "data")
    shutil.copytree(original.config_dir, copy / "config")
    with monkeypatch.context() as mp:
        mp.setenv("METNOS_HOME", str(copy))
        _edit_recorded_reply(Workspace.from_env(), out["turn_id"], {"paths": ["~/other.md"]})
        code, result = replay(capsys, out["turn_id"])
    assert code == 1
    d = result["results"][0]["divergence"]
    assert d["expected"]["type"] == "StepProposed" and d["step"] == 1
    assert d["changed"]["fields"]["args"] == {"recorded": {"paths": ["~/notes.md"]}, "now": {"paths": ["~/other.md"]}}
    # The original log still replays clean.
    assert Workspace.from_env() == original
    assert replay(capsys, out["turn_id"])[0] == 0


def test_live_llm_and_re_execute_modes(home: Path, capsys, monkeypatch) -> None:
    out = ask(capsys, monkeypatch, READ, "read ~/notes.md")
    with ScriptedLLM(READ) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        assert replay(capsys, out["turn_id"], "--live-llm")[0] == 0
        assert len(llm.requests) == 2
    with ScriptedLLM([call("get_now", {}), text("noon")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        code, result = replay(capsys, out["turn_id"], "--live-llm")
    assert code == 1, result
    assert result["results"][0]["divergence"]["expected"]["type"] == "LLMReplied", result["results"][0]["divergence"]

    (home / "notes.md").write_text("alpha\nbeta\ngamma\ndelta\n")
    code, result = replay(capsys, out["turn_id"], "--re-execute")
    assert code == 1  # drift is a finding, not a pass
    drift = result["results"][0]["drift"]
    assert len(drift) == 1 and drift[0]["executor"] == "read_files"
    assert "delta" in orjson.dumps(drift[0]["now"]).decode()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_rebuild_gives_every_projection_byte_for_byte(home: Path, capsys, monkeypatch, workers: str) -> None:
    from metnos.runtime.booted import Runtime

    ask(capsys, monkeypatch, READ, "read ~/notes.md")
    ask(capsys, monkeypatch, [call("get_now", {}), text("now")], "what time is it")
    assert main(["executors", "quarantine", "get_now", "--reason", "test"]) == 0
    with Runtime.boot(birth=False) as rt:
        rt.refresh()
        live = {name: view.state_bytes() for name, view in rt.projections().items()}
    assert all(live.values())
    assert main(["rebuild", "--workers", workers]) == 0
    from projections.views import VIEW_NAMES

    assert f"{len(VIEW_NAMES)} projections" in capsys.readouterr().out
    with Runtime.boot(birth=False) as rt:
        rebuilt = {name: view.state_bytes() for name, view in rt.projections().items()}
    assert rebuilt == live
    assert main(["rebuild", "nope"]) == 2


def test_replay_of_an_unknown_turn_is_one_clear_line(home: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["replay", "ffffffff"]) == 2
    assert "no turn" in capsys.readouterr().err
