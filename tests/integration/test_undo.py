"""Issue 6 item 5 end to end: ``metnos undo`` after turns run through the CLI against a scripted model."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from metnos.mechanisms.blobs import BlobStore
from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.support.layouts import LAYOUTS, apply_layout
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.support.workspace_template import initialise


@pytest.fixture(scope="module", params=LAYOUTS)
def home(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One workspace a layout for the module (init runs the birth tests once); each test undoes its own turns."""
    root = tmp_path_factory.mktemp("undo")
    with pytest.MonkeyPatch.context() as mp:
        user_home = apply_layout(request.param, root, mp, os.environ)
        initialise(os.environ)
        yield user_home


def ask(capsys, monkeypatch, script: list, request: str) -> dict:
    with ScriptedLLM([*script, text("done")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        code = main(["ask", request, "--yes", "--json"])
        out = orjson.loads(capsys.readouterr().out)
    assert code == 0, out
    return out


def undo(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["undo", *argv, "--json"])
    return code, orjson.loads(capsys.readouterr().out)


def undo_text(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["undo", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def turn_events(capsys, turn_id: str) -> list[dict]:
    capsys.readouterr()
    main(["events", "--json", "--aggregate", turn_id])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def undone_events(capsys, turn_id: str) -> list[dict]:
    return [e["state"] for e in turn_events(capsys, turn_id) if e["topic"].endswith("TurnUndone")]


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every entry under root with its bytes and mode: byte-for-byte comparisons."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = (p.read_bytes() if p.is_file() else None, p.stat().st_mode & 0o7777)
    return out


def snapshot_of(snap: dict, folder: str) -> dict:
    return {k[len(folder) + 1:]: v for k, v in snap.items() if k.startswith(folder + "/")}


def test_write_and_overwrite_are_undone_byte_for_byte(home: Path, capsys, monkeypatch) -> None:
    area = home / "u1"
    area.mkdir()
    old = area / "old.txt"
    old.write_bytes(b"\x00\xffthe original\r\nbytes\xfe")
    old.chmod(0o640)
    before = snapshot(area)
    out = ask(capsys, monkeypatch, [call("write_files", {"files": [
        {"path": "~/u1/new/deep/new.txt", "content": "hello"},
        {"path": "~/u1/old.txt", "content": "replaced", "mode": "overwrite"},
    ]})], "write two files")
    turn_id = out["turn_id"]
    assert (area / "new" / "deep" / "new.txt").read_text() == "hello"
    assert old.read_text() == "replaced"
    after = snapshot(area)

    # The dry run shows the plan and changes nothing, not even the log.
    code, plan = undo(capsys, "--dry-run")
    assert code == 0 and plan["status"] == "dry-run" and plan["turn_id"] == turn_id
    assert sorted((a["action"], Path(a["path"]).name) for a in plan["actions"]) == [("remove", "new.txt"), ("restore", "old.txt")]
    assert snapshot(area) == after
    assert undone_events(capsys, turn_id) == []
    code, shown, _ = undo_text(capsys, "--dry-run")
    assert "would remove  ~/u1/new/deep/new.txt" in shown and "would restore  ~/u1/old.txt" in shown and "nothing was changed" in shown

    code, result = undo(capsys)
    assert code == 0 and result["status"] == "undone" and result["turn_id"] == turn_id
    assert snapshot(area) == before  # new.txt and the folders made for it are gone; old.txt's bytes and mode are back
    [recorded] = undone_events(capsys, turn_id)
    assert recorded["forced"] is False
    assert sorted(Path(r["path"]).name for r in recorded["restored"]) == ["new.txt", "old.txt"]

    # The same turn again: nothing to do, and nothing recorded.
    code, shown, _ = undo_text(capsys, turn_id[:8])
    assert code == 0 and "already undone" in shown
    assert len(undone_events(capsys, turn_id)) == 1
    assert snapshot(area) == before

    capsys.readouterr()
    assert main(["replay", "--all"]) == 0


def test_undo_again_undoes_the_turn_before(home: Path, capsys, monkeypatch) -> None:
    first = ask(capsys, monkeypatch, [call("write_files", {"files": [{"path": "~/u2/a.txt", "content": "a"}]})], "write a")
    second = ask(capsys, monkeypatch, [call("write_files", {"files": [{"path": "~/u2/b.txt", "content": "b"}]})], "write b")
    code, result = undo(capsys)
    assert code == 0 and result["turn_id"] == second["turn_id"]
    assert not (home / "u2" / "b.txt").exists() and (home / "u2" / "a.txt").read_text() == "a"
    code, result = undo(capsys)
    assert code == 0 and result["turn_id"] == first["turn_id"]
    assert not (home / "u2").exists()
    capsys.readouterr()
    main(["turns", "list", "--json"])
    listed = capsys.readouterr().out
    assert first["turn_id"] in listed


def test_a_file_changed_since_is_a_conflict_unless_forced(home: Path, capsys, monkeypatch) -> None:
    target = home / "u3.txt"
    target.write_text("v0")
    out = ask(capsys, monkeypatch, [call("write_files", {"files": [{"path": "~/u3.txt", "content": "v1", "mode": "overwrite"}]})], "change it")
    target.write_text("the user's edit")

    code, shown, err = undo_text(capsys)
    assert code == 1
    assert "~/u3.txt: the turn left a file of 2 bytes" in shown and "now a file of 15 bytes" in shown
    assert "--force" in err
    assert target.read_text() == "the user's edit"
    assert undone_events(capsys, out["turn_id"]) == []

    code, result = undo(capsys, "--force")
    assert code == 0 and result["status"] == "undone" and result["forced"] is True
    assert target.read_text() == "v0"
    [recorded] = undone_events(capsys, out["turn_id"])
    assert recorded["forced"] is True
    # What --force overwrote is still in the blob store.
    displaced = recorded["restored"][0]["displaced"]
    blobs = BlobStore(Workspace.from_env().blobs_dir)
    assert blobs.get(displaced["hash"]) == b"the user's edit"


def test_moves_and_deletes_are_undone(home: Path, capsys, monkeypatch) -> None:
    area = home / "u4"
    (area / "dir" / "inner").mkdir(parents=True)
    (area / "a.txt").write_bytes(b"alpha")
    (area / "dir" / "x.bin").write_bytes(os.urandom(3000))
    (area / "dir" / "inner" / "y.txt").write_text("why")
    (area / "dir" / "link").symlink_to("x.bin")
    (area / "c.txt").write_text("see")
    before = snapshot(area)
    links_before = os.readlink(area / "dir" / "link")
    # One action closes a turn's pipeline: a move turn, then a delete turn.
    ask(capsys, monkeypatch, [call("move_files", {
        "moves": [{"src": "~/u4/a.txt", "dst": "~/u4/b.txt"}], "paths": ["~/u4/c.txt"], "dest_dir": "~/u4/archive",
    })], "tidy up")
    ask(capsys, monkeypatch, [call("delete_files", {"paths": ["~/u4/dir"], "recursive": True})], "delete dir")
    assert (area / "b.txt").exists() and not (area / "a.txt").exists()
    assert (area / "archive" / "c.txt").exists() and not (area / "dir").exists()

    code, result = undo(capsys)
    assert code == 0 and result["status"] == "undone", result
    assert [a["action"] for a in result["restored"]] == ["bring back"]
    assert snapshot(area / "dir") == snapshot_of(before, "dir")
    assert os.readlink(area / "dir" / "link") == links_before
    assert (area / "b.txt").exists()

    code, result = undo(capsys)
    assert code == 0 and result["status"] == "undone", result
    assert sorted((a["action"], Path(a["path"]).name) for a in result["restored"]) == [
        ("bring back", "a.txt"), ("bring back", "c.txt"), ("remove", "archive"), ("remove", "b.txt"),
    ]
    assert snapshot(area) == before


def test_a_sent_message_is_listed_as_not_undoable(home: Path, capsys, monkeypatch) -> None:
    outbox = Workspace.from_env().outbox_dir
    sent_before = set(outbox.glob("*.json")) if outbox.exists() else set()
    out = ask(capsys, monkeypatch, [call("send_messages", {"messages": [{"to_user": "lucia", "body": "out for a bit"}]})], "tell lucia")
    sent = set(outbox.glob("*.json")) - sent_before
    assert len(sent) == 1

    code, shown, _ = undo_text(capsys, "--dry-run")
    assert code == 0
    assert "cannot be undone:" in shown and "send_messages" in shown.split("cannot be undone:")[1]
    code, result = undo(capsys)
    assert code == 0 and result["status"] == "undone" and result["restored"] == []
    assert [(n["step"], n["executor"]) for n in result["not_undoable"]] == [(1, "send_messages")]
    [recorded] = undone_events(capsys, out["turn_id"])
    assert recorded["not_undoable"][0]["executor"] == "send_messages"
    assert set(outbox.glob("*.json")) - sent_before == sent  # said, not hidden, and not pretended away


def test_undone_turns_still_replay_and_nothing_is_left(home: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["replay", "--all"]) == 0
    assert "same path" in capsys.readouterr().out
    code, shown, _ = undo_text(capsys)
    assert code == 0 and "no turn left to undo; nothing to do" in shown


def test_a_path_above_the_caps_is_listed_not_hidden(home: Path, capsys, monkeypatch) -> None:
    from metnos.mechanisms.filestate import Limits
    from metnos.runtime.booted import Runtime
    from metnos.runtime.turn.session import run_turn

    big = home / "u6.txt"
    big.write_text("more than four bytes")
    with ScriptedLLM([call("write_files", {"files": [{"path": "~/u6.txt", "content": "x", "mode": "overwrite"}]}), text("done")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        with Runtime.boot(Workspace.from_env(), birth=False) as rt:
            rt.invoker.capture.limits = Limits(max_entries=10, max_bytes=4)
            outcome = run_turn(rt, "overwrite it", approver=lambda *a: (True, "test"))
    assert outcome.status == "answered"
    code, result = undo(capsys)
    assert code == 0 and result["turn_id"] == outcome.turn_id and result["restored"] == []
    [item] = result["not_undoable"]
    assert item["path"] == str(big.resolve()) and "more than 4 bytes" in item["reason"]
    assert big.read_text() == "x"  # nothing pretended: the file stays as the turn left it


def _turn_of_writes(rt, writes: list[tuple[str, str]]) -> str:
    """A turn of several write steps, recorded the way the loop records them (its shape allows one action)."""
    from domain.turn import Turn

    turn = Turn.start(id=rt.ids(), at=rt.clock(), text="several writes", actor="test", channel="test", mode="live", settings={}, runtime_version="test")
    for step, (path, content) in enumerate(writes, start=1):
        c = rt.invoker.call("write_files", {"files": [{"path": path, "content": content, "mode": "overwrite"}]}, caller={"kind": "test"}, turn_id=str(turn.id))
        assert c.ok, c.observation()
        turn.record(Turn.StepInvoked, at=rt.clock(), step=step, invocation_id=str(c.invocation.id), executor="write_files",
                    version=c.executor.version, digest=c.executor.digest, args_hash=c.invocation.args_hash, ok=True, kind="ok", exec_ms=0)
        rt.log.save(turn, c.invocation)
    turn.record(Turn.TurnAnswered, at=rt.clock(), text="done", steps=len(writes))
    rt.log.save(turn)
    return str(turn.id)


def test_steps_are_undone_last_first_and_a_cut_short_undo_resumes(home: Path, capsys) -> None:
    from metnos.runtime.booted import Runtime
    from replay.undo import Undoer

    f = home / "u7" / "f.txt"
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        turn_id = _turn_of_writes(rt, [("~/u7/f.txt", "v1"), ("~/u7/f.txt", "v2")])
        assert f.read_text() == "v2"
        plan = Undoer(rt).plan()
        assert plan.turn_id == turn_id
        assert [(a.step, a.verb, a.checked) for a in plan.actions] == [(2, "restore", True), (1, "remove", False)]
        # As if an undo stopped after the last step's file went back: running it again finishes the job.
        f.write_text("v1")
        plan = Undoer(rt).plan()
        assert plan.conflicts == [] and [(a.step, a.verb) for a in plan.actions] == [(1, "remove")]
        result = Undoer(rt).apply(plan)
        assert result.status == "undone"
    assert not f.exists() and not f.parent.exists()
