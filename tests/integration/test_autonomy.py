"""Issue 20 item 4: autonomy levels, against a real model server and real bubblewrap.

read_only only looks: what declares side effects is never offered nor run,
and every grant is bound read-only, so even an executor that lies about its
side effects cannot write. full asks what supervised asks (issue 30 item 4:
seeds/000 keeps the precautionary asymmetry "even within the Full autonomy
level"). The level is on the turn and on each invocation.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
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


def _world(home: Path) -> dict[str, str | None]:
    """What the side effects below could change: the files in the home and the outbox."""
    from metnos.settings.workspace import Workspace

    files = {str(f.relative_to(home)): f.read_text() for f in sorted(home.glob("*.txt"))}
    outbox = Workspace.from_env().outbox_dir
    files["outbox"] = str(sorted(p.name for p in outbox.glob("*.json"))) if outbox.exists() else None
    return files


def _side_effect(home: Path, what: str) -> tuple[str, str, dict]:
    """(request, executor, arguments) of one side effect that cannot be repeated safely."""
    (home / "precious.txt").write_text("keep me")
    if what == "delete":
        return "delete precious.txt", "delete_files", {"paths": [str(home / "precious.txt")]}
    if what == "move":
        return "rename precious.txt to moved.txt", "move_files", {"moves": [{"src": str(home / "precious.txt"), "dst": str(home / "moved.txt")}]}
    if what == "overwrite":
        return "overwrite precious.txt with replaced", "write_files", {"files": [{"path": str(home / "precious.txt"), "content": "replaced", "mode": "overwrite"}]}
    return "send hi to 42", "send_messages", {"messages": [{"to_user": "42", "body": "hi"}]}


@pytest.mark.parametrize("what", ["delete", "move", "overwrite", "send"])
def test_full_still_asks_before_a_side_effect_that_cannot_be_repeated_safely(home: Path, what: str, capsys, monkeypatch) -> None:
    """seeds/000: side_effects and not idempotent asks "even within the Full autonomy level"; --no declines it."""
    request, name, args = _side_effect(home, what)
    before = _world(home)
    code, out, _ = ask(capsys, monkeypatch, [call(name, args), text("done")], request, "--no", "--autonomy", "full")
    assert _world(home) == before, out  # nothing changed: not deleted, moved, overwritten nor sent
    assert out["status"] == "refused" and code == 3, out
    events = events_of(capsys, out["turn_id"])
    assert events[0]["state"]["autonomy"] == "full"
    [judged] = [e["state"]["verdict"] for e in events if kind(e) == "StepJudged"]
    assert judged["decision"] == "ask" and judged["reason"].endswith("even at autonomy full"), judged
    [asked] = [e["state"] for e in events if kind(e) == "ApprovalAsked"]
    [answered] = [e["state"] for e in events if kind(e) == "ApprovalAnswered"]
    assert asked["executor"] == name and (answered["approved"], answered["by"]) == (False, "flag:--no")
    assert "StepInvoked" not in [kind(e) for e in events] and "ApprovalWaived" not in [kind(e) for e in events]
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out


class _Terminal:
    """Standard input as a terminal, so `metnos ask` prompts for the approval."""

    closed = False

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("reply", ["y", "n"])
def test_under_full_a_delete_waits_for_the_prompt_and_only_yes_deletes(home: Path, reply: str, capsys, monkeypatch) -> None:
    request, name, args = _side_effect(home, "delete")
    seen_at_prompt: list[bool] = []

    def answer(prompt: str) -> str:
        seen_at_prompt.append((home / "precious.txt").exists())
        return reply

    monkeypatch.setattr("sys.stdin", _Terminal())
    monkeypatch.setattr("builtins.input", answer)
    code, out, _ = ask(capsys, monkeypatch, [call(name, args), text("deleted" if reply == "y" else "not deleted")],
                       request, "--autonomy", "full")
    assert seen_at_prompt == [True]  # asked once, while the file was still there
    assert (home / "precious.txt").exists() is (reply == "n"), out
    events = events_of(capsys, out["turn_id"])
    [answered] = [e["state"] for e in events if kind(e) == "ApprovalAnswered"]
    assert (answered["approved"], answered["by"]) == (reply == "y", "user:prompt")
    assert ("StepInvoked" in [kind(e) for e in events]) is (reply == "y")
    # The answer is an event: the replay takes it from the log and walks the same path.
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0, capsys.readouterr().out


def test_yes_given_with_the_request_is_the_users_answer_at_full_too(home: Path, capsys, monkeypatch) -> None:
    """--yes approves this turn's questions in advance: the question is still asked and recorded, answered by the flag."""
    request, name, args = _side_effect(home, "delete")
    code, out, _ = ask(capsys, monkeypatch, [call(name, args), text("deleted")], request, "--yes", "--autonomy", "full")
    assert code == 0 and not (home / "precious.txt").exists(), out
    events = events_of(capsys, out["turn_id"])
    kinds = [kind(e) for e in events]
    assert kinds.index("ApprovalAsked") < kinds.index("ApprovalAnswered") < kinds.index("StepInvoked")
    [answered] = [e["state"] for e in events if kind(e) == "ApprovalAnswered"]
    assert (answered["approved"], answered["by"]) == (True, "flag:--yes")
    [inv] = invocations_of(capsys, events)
    assert inv["autonomy"] == "full"


def test_the_invoker_refuses_a_side_effect_at_read_only_before_any_spawn(home: Path) -> None:
    """Below the turn too: a caller that reaches the invoker directly at read_only gets nothing written."""
    from metnos.runtime.booted import Runtime

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
    from metnos.mechanisms.executors.keys import load_signing_key
    from metnos.mechanisms.executors.signing import SigningError, sign_executor
    from tests.unit.executor_kit import write_executor

    ws = Workspace.from_env()
    d = write_executor(ws.executors_origin_dir("skill") / "compute_echo" / "1.0.0", name="compute_echo", created_by="skill:tests")
    manifest = d / "manifest.toml"
    manifest.write_text(manifest.read_text().replace('"fs:read" = ["~/notes"]', '"fs:read" = ["~"]\n"fs:write" = ["~"]'))
    with pytest.raises(SigningError, match="fs:write but contract.side_effects is false"):
        sign_executor(d, load_signing_key(ws))


def test_a_turn_recorded_when_full_answered_for_the_user_replays_to_a_question_and_says_why(home: Path, capsys, monkeypatch) -> None:
    """Before issue 30, full recorded ApprovalWaived and ran the delete unasked. Such a turn stays readable;
    its replay now asks there, parts from the record, and names that as the cause (not an edited log)."""
    from domain.turn import Turn
    from metnos.runtime.turn.loop import TurnLoop

    record = TurnLoop.record

    def as_recorded_before(self, turn, event_class, **fields):  # noqa: ANN001, ANN202
        if event_class is Turn.ApprovalAsked:
            return record(self, turn, Turn.ApprovalWaived, autonomy="full", **fields)
        if event_class is Turn.ApprovalAnswered:
            return None
        return record(self, turn, event_class, **fields)

    request, name, args = _side_effect(home, "delete")
    with monkeypatch.context() as patched:
        patched.setattr(TurnLoop, "record", as_recorded_before)
        code, out, _ = ask(capsys, monkeypatch, [call(name, args), text("deleted")], request, "--yes", "--autonomy", "full")
    assert code == 0 and not (home / "precious.txt").exists(), out
    events = events_of(capsys, out["turn_id"])
    assert "ApprovalWaived" in [kind(e) for e in events] and "ApprovalAsked" not in [kind(e) for e in events]
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 1
    [result] = orjson.loads(capsys.readouterr().out)["results"]
    divergence = result["divergence"]
    assert (divergence["expected"]["type"], divergence["found"]["type"]) == ("ApprovalWaived", "ApprovalAsked"), divergence
    [cause] = divergence["causes"]
    assert cause["kind"] == "approval-now-asked"
    assert cause["message"].startswith("step 1: delete_files ran without a question because autonomy full answered for the user")


def test_a_guest_approves_what_actors_guest_approvals_lists_on_its_own_and_nothing_else(home: Path, capsys, monkeypatch) -> None:
    """[actors.guest] approvals: a listed executor asks the guest (its own approver) and runs once approved; one not
    listed is refused without asking, as for every guest before the setting. Both replay from the log as they ran."""
    from metnos.runtime.booted import Runtime
    from metnos.runtime.turn.session import run_turn

    Workspace.from_env().config_file.write_text('[actors.guest]\nautonomy = "supervised"\napprovals = ["write_files"]\n')
    (home / "old.md").write_text("keep me")
    asked = []

    def guest_says_yes(step: int, executor: str, args: dict, reason: str) -> tuple[bool, str]:
        asked.append(executor)
        return True, "guest:test"

    script = [*write_note(home), call("delete_files", {"paths": [str(home / "old.md")]}), text("deleted")]
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        with Runtime.boot(Workspace.from_env(), birth=False) as rt:
            wrote = run_turn(rt, "save a note to todo.md: buy milk", approver=guest_says_yes, principal="guest_abc123", cache=False)
            deleted = run_turn(rt, "delete old.md", approver=guest_says_yes, principal="guest_abc123", cache=False)
    assert wrote.status == "answered" and (home / "todo.md").read_text() == "- buy milk\n"
    assert (home / "old.md").read_text() == "keep me" and asked == ["write_files"]
    events = events_of(capsys, wrote.turn_id)
    assert events[0]["state"]["approvals"] == ["write_files"] and events[0]["state"]["principal"] == "guest_abc123"
    [answered] = [e["state"] for e in events if kind(e) == "ApprovalAnswered"]
    assert (answered["approved"], answered["by"]) == (True, "guest:test")
    [judged] = [e["state"]["verdict"] for e in events_of(capsys, deleted.turn_id) if kind(e) == "StepJudged"]
    assert (judged["decision"], judged["blocked_by"]) == ("deny", "actor")
    for turn_id in (wrote.turn_id, deleted.turn_id):
        capsys.readouterr()
        assert main(["replay", turn_id, "--json"]) == 0, capsys.readouterr().out
