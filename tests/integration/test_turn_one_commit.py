"""A turn's events are committed whole (DESIGN.md decision 1, issue 37 item 7).

The turn's opening is committed before the model is first asked; the rest is
held in the turn's unit of work and committed at its close, before a person is
asked, or after an executor changed the world: never one transaction a step.
A kill between two steps leaves the turn as its last commit left it, closed as
abandoned at the next boot, with no part of the step that was not committed.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from uuid import uuid4

import orjson
import pytest

from bench._turns import InstantPorts, script, turn_loop
from domain.turn import Turn
from metnos.mechanisms.eventlog import EventLog
from metnos.runtime.booted import Runtime
from metnos.runtime.turn.loop import TurnRequest
from metnos.settings.workspace import Workspace
from tests.support.cli_process import Home, initialised, wait_for
from tests.support.scripted_llm import Recorded, ScriptedLLM, Step, call, slow, text


def kind(event: dict) -> str:
    return event["topic"].rsplit(".", 1)[-1]


def events_of(home: Home, aggregate: str) -> list[dict]:
    done = home.run("events", "--json", "--aggregate", aggregate)
    assert done.returncode == 0, done.stderr
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def writer_then_reader(request: Recorded) -> Step:
    """Write the file, read it back, then think for a long time before answering."""
    said = [m for m in request.messages if m.get("role") == "tool"]
    if not said:
        return call("write_files", {"files": [{"path": "~/kept/a.txt", "content": "a"}]})
    if len(said) == 1:
        return call("read_files", {"paths": ["~/kept/a.txt"]})
    return slow(text("a is written"), 120)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    home = initialised(tmp_path)
    (home.user / "kept").mkdir()
    return home


def test_a_turn_killed_between_steps_is_closed_at_boot_with_no_part_of_the_step_not_committed(home: Home) -> None:
    with ScriptedLLM([writer_then_reader] * 4) as llm:
        env = {"METNOS_LLM_URL": llm.url, "METNOS_LLM_MODEL": "scripted"}
        proc = home.spawn("ask", "--yes", "--no-cache", "write a then read it", **env)
        # The third question comes after both steps ran: the read (step 2) is held, not committed.
        wait_for(lambda: len(llm.requests) >= 3, timeout=180, what="the question after the second step", proc=proc)
        proc.kill()
        proc.communicate(timeout=60)
    assert (home.user / "kept" / "a.txt").read_text() == "a"

    listed = home.run("turns", "list", "--json")  # a boot: the turn is closed as abandoned
    assert listed.returncode == 0, listed.stderr
    (row,) = orjson.loads(listed.stdout)
    assert row["status"] == "abandoned", row
    events = events_of(home, row["id"])
    kinds = [kind(e) for e in events]
    assert [e["aggregate_version"] for e in events] == list(range(1, len(events) + 1))
    assert kinds[-1] == "TurnAbandoned" and kinds.count("TurnAbandoned") == 1
    # Step 1 (the write, which changed the world) is in the log whole; step 2 (the read) not at all.
    steps = sorted({e["state"]["step"] for e in events if kind(e) in ("StepProposed", "StepInvoked", "ObservationRecorded")})
    assert steps == [1], kinds
    for name in ("StepProposed", "StepResolved", "ApprovalAsked", "ApprovalAnswered", "StepInvoked", "ObservationRecorded"):
        assert name in kinds, f"{name} missing from {kinds}"
    abandoned = events[-1]["state"]
    assert abandoned["step"] == 1 and abandoned["events"] == len(events) - 1
    (invoked,) = [e for e in events if kind(e) == "StepInvoked"]
    assert "InvocationCompleted" in [kind(e) for e in events_of(home, invoked["state"]["invocation_id"])]
    assert list((home.data / ".runtime" / "turns").glob("*.lock")) == []

    replayed = home.run("replay", "--all")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    # What the committed step wrote can be put back.
    undone = home.run("undo", "--json")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert not (home.user / "kept" / "a.txt").exists()


def test_a_turn_of_several_steps_takes_two_transactions_its_opening_and_its_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METNOS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    from metnos.adapters.cli import main

    assert main(["init"]) in (0, None)
    with Runtime.boot(birth=False) as rt:
        inserts: list[list[str]] = []
        # The LMDB recorder's one way in: a save's rows, and insert_events's once made rows.
        real_insert = rt.log.recorder.insert_rows

        def counted(rows, **kwargs):
            inserts.append([topic.rsplit(".", 1)[-1] for _, _, topic, _ in rows])
            return real_insert(rows, **kwargs)

        monkeypatch.setattr(rt.log.recorder, "insert_rows", counted)
        loop = turn_loop(rt, InstantPorts(rt, script(5)), dict(os.environ))
        outcome = loop.run(TurnRequest(text="read my notes and tell me what they say"))
        assert outcome.status == "answered", outcome
        assert loop.sink.transactions == 2
        # One insert a transaction: the opening, then every read, its invocation, and the answer.
        opening, close = inserts
        assert opening[0] == "TurnStarted" and "PrefilterRanked" in opening and "StepProposed" not in opening, opening
        steps = close.count("StepInvoked")
        assert steps >= 2 and close.count("StepProposed") == close.count("InvocationCompleted") == steps, close
        assert "TurnAnswered" in close


def test_what_a_unit_of_work_holds_is_seen_by_any_read_of_its_process(tmp_path: Path) -> None:
    log = EventLog(Workspace(tmp_path / "data", tmp_path / "config"), env={"LMDB_SYNC": "no"})
    try:
        with log.unit_of_work() as unit:
            turn = Turn.start(id=uuid4(), at=datetime.now(timezone.utc), text="t", actor="user", channel="cli", mode="normal",
                              settings={}, runtime_version="0")
            log.save(turn)
            assert unit.pending == 1 and unit.transactions == 0
            # A read in this process, from any thread, commits what is held first: it sees the turn.
            seen: list[int | None] = []
            reader = threading.Thread(target=lambda: seen.append(log.recorder.max_notification_id()))
            reader.start()
            reader.join()
            assert seen == [1]
            assert unit.pending == 0 and unit.transactions == 1
            turn.record(Turn.TurnAnswered, at=datetime.now(timezone.utc), text="done", steps=0)
            log.save(turn)
            assert [type(e).__name__ for e in log.events.get(turn.id)] == ["TurnStarted", "TurnAnswered"]
            assert unit.transactions == 2
        assert unit.transactions == 2  # nothing left to commit at the block's end
    finally:
        log.close()


def test_a_unit_of_work_encodes_each_save_as_it_comes_so_its_commit_only_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = EventLog(Workspace(tmp_path / "data", tmp_path / "config"), env={"LMDB_SYNC": "no"})
    encoded: list[int] = []
    real_encode = log.mapper.stored_rows

    def counted(events):
        encoded.append(len(events))
        return real_encode(events)

    monkeypatch.setattr(log.mapper, "stored_rows", counted)
    at = datetime.now(timezone.utc)
    try:
        with log.unit_of_work() as unit:
            turn = Turn.start(id=uuid4(), at=at, text="t", actor="user", channel="cli", mode="normal", settings={}, runtime_version="0")
            log.save(turn)
            turn.record(Turn.TurnAnswered, at=at, text="done", steps=0)
            log.save(turn)
            # Each save was encoded when it was made, one event at a time, before any commit.
            assert encoded == [1, 1] and unit.transactions == 0
            # An event that cannot be encoded fails its own save, with the encoder's error; what came before stays held.
            bad = Turn.start(id=uuid4(), at=at, text=object(), actor="user", channel="cli", mode="normal",  # type: ignore[arg-type]
                             settings={}, runtime_version="0")
            with pytest.raises(TypeError):
                log.save(bad)
            assert unit.pending == 2
        assert encoded == [1, 1, 1] and unit.transactions == 1
        assert [type(e).__name__ for e in log.events.get(turn.id)] == ["TurnStarted", "TurnAnswered"]
        assert list(log.events.get(bad.id)) == []
    finally:
        log.close()
