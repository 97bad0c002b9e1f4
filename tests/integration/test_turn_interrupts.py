"""Issue 18 item 1: a turn cut short by SIGINT, SIGTERM or SIGKILL is closed, listed, replayed and undone.

Real processes throughout: ``python -m metnos ask`` against the scripted model
on 127.0.0.1, stalled on its second reply so that the turn is mid-flight with
one finished step (a file written), then signalled from here.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.support.cli_process import metnos_env, run, spawn, wait_for
from tests.support.scripted_llm import ScriptedLLM, call, slow, text

# Kills, damaged files and full disks with real processes: their own CI step (.ci/faults).
pytestmark = pytest.mark.faults

STALL_S = 300  # the model "thinks" far longer than any test waits


def start_stalled_turn(home: Path, llm: ScriptedLLM) -> tuple[subprocess.Popen, dict[str, str], Path]:
    """An ask that has written ~/notes/a.txt at step 1 and now waits for the model."""
    note = home / "notes" / "a.txt"
    note.parent.mkdir(exist_ok=True)
    note.write_text("old")
    env = metnos_env(METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
    proc = spawn(["ask", "--yes", "overwrite my note with new"], env)
    wait_for(lambda: len(llm.requests) >= 2, timeout=120, what="the turn to ask the model again after step 1", proc=proc)
    assert note.read_text() == "new"
    return proc, env, note


def script() -> list:
    return [
        call("write_files", {"files": [{"path": "~/notes/a.txt", "content": "new", "mode": "overwrite"}]}),
        slow(text("done"), STALL_S),
    ]


def turn_rows(env: dict[str, str]) -> list[dict]:
    done = run(["turns", "list", "--json"], env)
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def turn_events(env: dict[str, str], turn_id: str) -> list[dict]:
    """The turn's events as stored, read without booting a runtime (no orphan is closed by reading)."""
    done = run(["events", "--json", "--aggregate", turn_id], env)
    assert done.returncode == 0, done.stderr
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def kind(event: dict) -> str:
    return event["topic"].rsplit(".", 1)[-1]


def assert_replays_clean_and_undoes(env: dict[str, str], note: Path, turn_id: str, stopped: str) -> None:
    replayed = run(["replay", "--all"], env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"turn {turn_id} {stopped}: replayed to where it stopped, same path" in replayed.stdout
    undone = run(["undo", "--json"], env)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    result = orjson.loads(undone.stdout)
    assert result["turn_id"] == turn_id and result["status"] == "undone"
    assert [Path(r["path"]).name for r in result["restored"]] == ["a.txt"]
    assert note.read_text() == "old"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_turn_records_it_interrupted_at_the_step_reached(home: Path, sig: signal.Signals) -> None:
    with ScriptedLLM(script(), dialect="openai") as llm:
        proc, env, note = start_stalled_turn(home, llm)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig.value, err
    assert "Traceback" not in err
    assert f"interrupted by {sig.name} while waiting for the model, at step 1" in err
    assert "recorded as interrupted" in err

    [row] = turn_rows(env)
    assert row["status"] == "interrupted" and row["steps"] == 1
    events = turn_events(env, row["id"])
    last = events[-1]
    assert kind(last) == "TurnInterrupted"
    assert last["state"] == {"signal": sig.name, "step": 1, "during": "while waiting for the model"}
    # The model was asked and had not answered: that question is in the log, no reply.
    assert [kind(e) for e in events[-3:]] == ["ObservationRecorded", "LLMAsked", "TurnInterrupted"]
    assert_replays_clean_and_undoes(env, note, row["id"], f"interrupted by {sig.name} at step 1")


def test_a_killed_turn_stays_open_while_its_writer_lives_and_is_abandoned_after(home: Path) -> None:
    with ScriptedLLM(script(), dialect="openai") as llm:
        proc, env, note = start_stalled_turn(home, llm)
        # A command run meanwhile sees the turn open and leaves it to its writer.
        [row] = turn_rows(env)
        assert row["status"] == "open"
        proc.kill()
        proc.communicate(timeout=60)
    turn_id = row["id"]
    assert kind(turn_events(env, turn_id)[-1]) == "ObservationRecorded"  # the log as the kill left it

    [row] = turn_rows(env)
    assert row["status"] == "abandoned" and row["steps"] == 1
    events = turn_events(env, turn_id)
    [abandoned] = [e for e in events if kind(e) == "TurnAbandoned"]
    assert abandoned is events[-1]
    assert abandoned["state"]["step"] == 1 and abandoned["state"]["events"] == len(events) - 1
    assert "writer stopped" in abandoned["state"]["reason"]
    shown = run(["turns", "show", turn_id[:8]], env)
    assert "abandoned after" in shown.stdout
    assert_replays_clean_and_undoes(env, note, turn_id, "abandoned at step 1")


def test_the_daemon_closes_an_orphaned_turn_at_start(home: Path) -> None:
    with ScriptedLLM(script(), dialect="openai") as llm:
        proc, env, _note = start_stalled_turn(home, llm)
        proc.kill()
        proc.communicate(timeout=60)
    done = run(["daemon", "--once", "--skip-birth"], env)
    assert done.returncode == 0, done.stderr
    started = orjson.loads(done.stdout.splitlines()[0])
    assert started["event"] == "started"
    [turn_id] = started["abandoned"]
    assert kind(turn_events(env, turn_id)[-1]) == "TurnAbandoned"
    # Closed once: the next boot finds nothing left to close.
    again = run(["daemon", "--once", "--skip-birth"], env)
    assert orjson.loads(again.stdout.splitlines()[0])["abandoned"] == []
    assert [kind(e) for e in turn_events(env, turn_id)].count("TurnAbandoned") == 1
