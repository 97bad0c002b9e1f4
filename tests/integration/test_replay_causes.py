"""Replay says why, in the user's terms (issue 18 item 3).

Each test records a real turn in a real LMDB log, plants one change (in a
copy of the workspace where the log itself is edited), replays, and asserts
that the report names the cause: which event is missing and between which,
which events are out of order, how the model reply was edited, which file of
which executor changed, which setting, which model.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import orjson
import pytest

from tests.support.log_surgery import drop_event, positions, record_at, replace_record
from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.support.workspace_template import initialise

READ = [call("read_files", {"paths": ["~/notes.md"]}), text("alpha, beta, gamma")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A workspace with one recorded turn that read a file: (the workspace root, the turn id)."""
    root = tmp_path_factory.mktemp("causes")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("METNOS_HOME", str(root / "metnos-home"))
        mp.setenv("HOME", str(root / "user"))
        (root / "user").mkdir()
        (root / "user" / "notes.md").write_text("alpha\nbeta\ngamma\n")
        for key in ("PERSISTENCE_MODULE", "LMDB_PATH", "METNOS_LLM_URL", "METNOS_LLM_MODEL", "METNOS_JUDGE_THRESHOLD"):
            mp.delenv(key, raising=False)
        initialise(os.environ)
        with ScriptedLLM(READ) as llm:
            mp.setenv("METNOS_LLM_URL", llm.url)
            mp.setenv("METNOS_LLM_MODEL", "scripted")
            assert main(["ask", "read ~/notes.md", "--json"]) == 0
        from metnos.mechanisms.eventlog import EventLog
        from domain.turn import Turn

        log = EventLog(Workspace.from_env())
        try:
            [(_, started)] = list(log.domain_events(topics=(f"{Turn.__module__}:Turn.TurnStarted",)))
        finally:
            log.close()
    yield root, str(started.originator_id)


@pytest.fixture
def copy(recorded: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    root, turn_id = recorded
    shutil.copytree(root, tmp_path / "copy", symlinks=True)
    monkeypatch.setenv("METNOS_HOME", str(tmp_path / "copy" / "metnos-home"))
    monkeypatch.setenv("HOME", str(tmp_path / "copy" / "user"))
    for key in ("PERSISTENCE_MODULE", "LMDB_PATH", "METNOS_LLM_URL", "METNOS_JUDGE_THRESHOLD"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
    return tmp_path / "copy", turn_id


def replay(capsys, *argv: str) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = main(["replay", *argv, "--json"])
    result = orjson.loads(capsys.readouterr().out)
    main(["replay", *argv])
    return code, result["results"][0], capsys.readouterr().out


def causes_of(result: dict) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for cause in result["divergence"]["causes"]:
        found.setdefault(cause["kind"], []).append(cause)
    return found


def edit_log(turn_id: str, change) -> None:
    """Apply ``change(txn, rows, dbs)`` to the turn's records in the log, in one write transaction.

    ``rows`` is [(version, notification id, record bytes, event)], in version order; ``dbs`` holds
    the log and its recorder, for tests/log_surgery.py's edits.
    """
    from metnos.mechanisms.eventlog import EventLog

    log = EventLog(Workspace.from_env())
    try:
        recorder = log.recorder
        with recorder.shared.read() as txn:
            events = log.events.get(UUID(turn_id))
            ids = positions(txn, recorder, UUID(turn_id))
            rows = [(event.originator_version, nid, record_at(txn, recorder, nid), event) for event, nid in zip(events, ids)]
        recorder.shared.write(lambda txn: change(txn, rows, {"log": log, "recorder": recorder}))
    finally:
        log.close()


def test_a_missing_event_is_named_with_its_neighbours(copy, capsys) -> None:
    _, turn_id = copy

    def delete_one(txn, rows, dbs):
        version, _, _, event = next(r for r in rows if type(r[3]).__name__ == "StepJudged")
        drop_event(txn, dbs["recorder"], UUID(turn_id), version)
        delete_one.gone = (version, [type(r[3]).__name__ for r in rows if r[0] in (version - 1, version + 1)])

    edit_log(turn_id, delete_one)
    code, result, shown = replay(capsys, turn_id)
    assert code == 1
    version, (before, after) = delete_one.gone
    [missing] = causes_of(result)["missing-event"]
    assert missing["message"] == (
        f"event {version} of the turn is missing from the log, between {before} (event {version - 1}) and {after} (event {version + 1})"
    )
    assert f"why: {missing['message']}" in shown


def test_events_out_of_order_are_named(copy, capsys) -> None:
    _, turn_id = copy

    def swap(txn, rows, dbs):
        names = [type(r[3]).__name__ for r in rows]
        i = names.index("StepResolved")
        (_, key_a, value_a, _), (_, key_b, value_b, _) = rows[i], rows[i + 1]
        replace_record(txn, dbs["recorder"], key_a, value_b)
        replace_record(txn, dbs["recorder"], key_b, value_a)
        swap.pair = (names[i], rows[i][0], names[i + 1], rows[i + 1][0])

    edit_log(turn_id, swap)
    code, result, shown = replay(capsys, turn_id)
    assert code == 1
    first, v_first, second, v_second = swap.pair
    messages = [c["message"] for c in causes_of(result)["out-of-order"]]
    assert f"events out of order in the log: {first} (event {v_first}) is stored after {second} (event {v_second})" in messages
    assert "why: events out of order" in shown


def test_an_edited_model_reply_is_shown_as_a_diff_of_the_two_replies(copy, capsys) -> None:
    _, turn_id = copy
    from domain.turn import Turn
    from metnos.mechanisms.store.records import encode_event

    def edit(txn, rows, dbs):
        _, key, _, event = next(r for r in rows if isinstance(r[3], Turn.LLMReplied))
        reply = dict(event.reply)
        reply["tool_calls"] = [{**reply["tool_calls"][0], "arguments": {"paths": ["~/secrets.md"]}}]
        edited = Turn.LLMReplied(originator_id=event.originator_id, originator_version=event.originator_version,
                                 timestamp=event.timestamp, round=event.round, reply=reply, intent_ms=event.intent_ms)
        replace_record(txn, dbs["recorder"], key, encode_event(dbs["log"].mapper.to_stored_event(edited)))

    edit_log(turn_id, edit)
    code, result, shown = replay(capsys, turn_id)
    assert code == 1
    [edited] = causes_of(result)["edited-reply"]
    assert "it was edited in the log after the turn" in edited["message"]
    lines = edited["diff"].splitlines()
    assert any(line.startswith("-") and "~/notes.md" in line for line in lines)
    assert any(line.startswith("+") and "~/secrets.md" in line for line in lines)
    assert "+++ the reply in the log now" in shown and "~/secrets.md" in shown


def test_an_executor_whose_files_changed_names_the_file_and_its_digests(copy, capsys) -> None:
    _, turn_id = copy
    code_dir = Workspace.from_env().executors_origin_dir("seed") / "read_files" / "1.0.0"
    main_py = code_dir / "main.py"
    main_py.write_text(main_py.read_text() + "\n# a local change\n")
    assert main(["executors", "sign", str(code_dir)]) == 0
    assert main(["executors", "list"]) == 0  # a boot verifies the new files and runs their birth tests
    import blake3

    now = "blake3:" + blake3.blake3(main_py.read_bytes()).hexdigest()
    code, result, shown = replay(capsys, turn_id)
    assert code == 1
    messages = [c["message"] for c in causes_of(result)["executor-changed"]]
    [message] = [m for m in messages if "main.py" in m]
    assert message.startswith("executor read_files: main.py changed since the turn (blake3:") and f"{now} now)" in message
    assert not any("manifest.toml" in m for m in messages)


def test_a_changed_setting_is_named_with_its_variable_and_both_values(copy, capsys, monkeypatch) -> None:
    _, turn_id = copy
    monkeypatch.setenv("METNOS_JUDGE_THRESHOLD", "0.95")
    code, result, shown = replay(capsys, turn_id)
    assert code == 1
    [setting] = causes_of(result)["setting-changed"]
    assert setting["message"] == "setting judge_threshold (METNOS_JUDGE_THRESHOLD) changed: 0.3 then, 0.95 now"


def test_a_different_model_is_named(copy, capsys, monkeypatch) -> None:
    _, turn_id = copy
    with ScriptedLLM([call("read_files", {"paths": ["~/notes.md", "~/other.md"]}), text("x")], model="another-model") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        code, result, shown = replay(capsys, turn_id, "--live-llm")
    assert code == 1
    found = causes_of(result)
    [model] = found["different-model"]
    assert model["message"] == "a different model: the turn was answered by 'scripted-model', now by 'another-model'"
    assert "~/other.md" in found["different-reply"][0]["diff"]


def test_re_execute_is_clean_for_the_clock_and_exits_1_on_drift(copy, capsys, monkeypatch) -> None:
    root, turn_id = copy
    with ScriptedLLM([call("get_now", {}), text("it is now")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        capsys.readouterr()
        assert main(["ask", "what time is it", "--json"]) == 0
        clock_turn = orjson.loads(capsys.readouterr().out)["turn_id"]
    code, result, shown = replay(capsys, clock_turn, "--re-execute")
    assert code == 0, shown
    assert result["drift"] == []

    (root / "user" / "notes.md").write_text("alpha\nbeta\ngamma\ndelta\n")
    code, result, shown = replay(capsys, turn_id, "--re-execute")
    assert code == 1
    [drift] = result["drift"]
    assert drift["executor"] == "read_files" and drift["compared"] == "value"
    assert "now observes something else than recorded" in shown
