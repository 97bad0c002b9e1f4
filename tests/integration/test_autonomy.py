"""Issue 20 item 4: autonomy levels, against a real model server and real bubblewrap.

read_only only looks: what declares side effects is never offered nor run,
and every grant is bound read-only, so even an executor that lies about its
side effects cannot write. full spares the question only for what undo can
reverse. The level is on the turn and on each invocation.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from metnos.cli import main
from metnos.workspace import Workspace
from tests.integration.test_side_effect_gate import events_of, kind
from tests.support.scripted_llm import ScriptedLLM, call, text


def ask(capsys, monkeypatch, script: list, *argv: str) -> tuple[int, dict, ScriptedLLM]:
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        code = main(["ask", *argv, "--json", "--no-cache"])
        out = orjson.loads(capsys.readouterr().out)
    return code, out, llm


def invocations_of(capsys, turn_events: list[dict]) -> list[dict]:
    ids = [e["state"]["invocation_id"] for e in turn_events if kind(e) == "StepInvoked"]
    return [events_of(capsys, i)[0]["state"] for i in ids]


def write_note(home: Path) -> list:
    return [call("write_files", {"files": [{"path": str(home / "todo.md"), "content": "- buy milk\n"}]}), text("saved")]


def test_a_read_only_turn_cannot_write_even_when_the_model_asks(home: Path, capsys, monkeypatch) -> None:
    code, out, llm = ask(capsys, monkeypatch, write_note(home), "save a note to todo.md: buy milk", "--yes", "--autonomy", "read_only")
    assert not (home / "todo.md").exists()
    assert out["status"] == "refused" and code == 3, out
    # Never offered: the model did not see write_files among its tools.
    assert "write_files" not in llm.requests[0].tool_names
    events = events_of(capsys, out["turn_id"])
    assert events[0]["state"]["autonomy"] == "read_only"
    [rejected] = [e["state"] for e in events if kind(e) == "StepRejected"]
    assert rejected["kind"] == "autonomy" and rejected["observation"]["error_class"] == "autonomy_read_only"
    assert "StepInvoked" not in [kind(e) for e in events] and "ApprovalAsked" not in [kind(e) for e in events]
    # Replayed from the log at the same level, exactly.
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out


def test_the_same_request_supervised_offers_and_writes(home: Path, capsys, monkeypatch) -> None:
    code, out, llm = ask(capsys, monkeypatch, write_note(home), "save a note to todo.md: buy milk", "--yes")
    assert code == 0 and (home / "todo.md").read_text() == "- buy milk\n", out
    assert "write_files" in llm.requests[0].tool_names
    events = events_of(capsys, out["turn_id"])
    assert events[0]["state"]["autonomy"] == "supervised"
    [inv] = invocations_of(capsys, events)
    assert inv["autonomy"] == "supervised"


def test_config_toml_sets_read_only_and_the_flag_overrides_it(home: Path, capsys, monkeypatch) -> None:
    config = Workspace.from_env().config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[runtime]\nautonomy = "read_only"\n')
    _, out, _ = ask(capsys, monkeypatch, write_note(home), "save a note to todo.md: buy milk", "--yes")
    assert out["status"] == "refused" and not (home / "todo.md").exists(), out
    code, out, _ = ask(capsys, monkeypatch, write_note(home), "save a note to todo.md: buy milk", "--yes", "--autonomy", "supervised")
    assert code == 0 and (home / "todo.md").exists(), out


def test_a_bad_level_in_config_is_named_not_ignored(home: Path, capsys, monkeypatch) -> None:
    config = Workspace.from_env().config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[runtime]\nautonomy = "yolo"\n')
    code, out, _ = ask_raw(capsys, monkeypatch, write_note(home), "save a note", "--yes")
    assert code != 0
    assert "[runtime] autonomy" in out and "yolo" in out and "read_only, supervised or full" in out
    assert not (home / "todo.md").exists()


def ask_raw(capsys, monkeypatch, script: list, *argv: str) -> tuple[int, str, ScriptedLLM]:
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        code = main(["ask", *argv])
        captured = capsys.readouterr()
    return code, captured.out + captured.err, llm


def test_full_writes_without_asking_but_never_waives_what_undo_cannot_reverse(home: Path, capsys, monkeypatch) -> None:
    # --no declines any question: the write runs only because full did not ask.
    code, out, _ = ask(capsys, monkeypatch, write_note(home), "save a note to todo.md: buy milk", "--no", "--autonomy", "full")
    assert code == 0 and (home / "todo.md").read_text() == "- buy milk\n", out
    events = events_of(capsys, out["turn_id"])
    [waived] = [e["state"] for e in events if kind(e) == "ApprovalWaived"]
    assert waived["executor"] == "write_files" and waived["autonomy"] == "full"
    assert "ApprovalAsked" not in [kind(e) for e in events]
    [inv] = invocations_of(capsys, events)
    assert inv["autonomy"] == "full"
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out
    # A message cannot be unsent: full still asks, and --no declines it.
    script = [call("send_messages", {"messages": [{"to_user": "42", "body": "hi"}]}), text("sent")]
    _, out, _ = ask(capsys, monkeypatch, script, "send hi to 42 on telegram", "--no", "--autonomy", "full")
    kinds = [kind(e) for e in events_of(capsys, out["turn_id"])]
    assert "ApprovalAsked" in kinds and "ApprovalWaived" not in kinds and "StepInvoked" not in kinds, kinds


def test_the_invoker_refuses_a_side_effect_at_read_only_before_any_spawn(home: Path) -> None:
    """Below the turn too: a caller that reaches the invoker directly at read_only gets nothing written."""
    from metnos.runtime import Runtime

    target = home / "direct.txt"
    with Runtime.boot(Workspace.from_env()) as rt:
        done = rt.invoker.call("write_files", {"files": [{"path": str(target), "content": "x"}]},
                               caller={"kind": "user", "actor": "test"}, autonomy="read_only")
        assert done.refusal is not None and done.refusal.kind == "AutonomyReadOnly"
        assert done.outcome is None and not target.exists()
        requested, refused = done.invocation.pending_events
        assert requested.autonomy == "read_only" and refused.kind == "AutonomyReadOnly"


def test_a_manifest_cannot_hide_a_write_grant_behind_no_side_effects(home: Path) -> None:
    """The first fence for a read_only turn: what is offered says it only reads, and signing holds it to that."""
    from metnos.executors.keys import load_signing_key
    from metnos.executors.signing import SigningError, sign_executor
    from tests.unit.executor_kit import write_executor

    ws = Workspace.from_env()
    d = write_executor(ws.executors_origin_dir("skill") / "compute_echo" / "1.0.0", name="compute_echo", created_by="skill:tests")
    manifest = d / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('"fs:read" = ["~/notes"]', '"fs:read" = ["~"]\n"fs:write" = ["~"]'))
    with pytest.raises(SigningError, match="fs:write but contract.side_effects is false"):
        sign_executor(d, load_signing_key(ws))
