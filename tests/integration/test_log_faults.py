"""The log and its projections under faults, with real processes (issue 18 items 5 and 6).

Each test plants a fault a user can meet (commands started at once, a data
file cut short or emptied, a full disk) and asserts that nothing committed is
lost, nothing is silently replaced, the next command works, and the user is
told what happened.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import lmdb
import orjson
import pytest

from tests.support.cli_process import Home, initialised
from tests.support.scripted_llm import ScriptedLLM, call, text

# Kills, damaged files and full disks with real processes: their own CI step (.ci/faults).
pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    """A workspace with a history: init, then two turns that wrote files."""
    home = initialised(tmp_path_factory.mktemp("faults"))
    for n in (1, 2):
        with ScriptedLLM([call("write_files", {"files": [{"path": f"~/f{n}.txt", "content": f"v{n}"}]}), text("done")]) as llm:
            done = home.run("ask", f"write f{n}", "--yes", "--json", METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
        assert done.returncode == 0, done.stderr
    yield home


def copy_of(origin: Home, where: Path) -> Home:
    shutil.copytree(origin.root, where / "copy", symlinks=True)
    return Home(where / "copy")


def turn_ids(home: Home) -> list[str]:
    listed = home.run("turns", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return sorted(t["id"] for t in orjson.loads(listed.stdout))


def add_turns(home: Home, count: int) -> None:
    """Many recorded turns, written straight to the log: folds that take long enough to overlap."""
    from datetime import UTC, datetime
    from uuid import uuid4

    from domain.turn import Turn
    from metnos.mechanisms.eventlog import EventLog
    from metnos.settings.workspace import Workspace

    log = EventLog(Workspace(data_dir=home.data, config_dir=home.metnos_home / "config"))
    try:
        at = datetime.now(UTC)
        for start in range(0, count, 500):
            turns = []
            for n in range(start, min(count, start + 500)):
                turn = Turn.start(id=uuid4(), at=at, text=f"turn {n}", actor="test", channel="test", mode="live", settings={}, runtime_version="test")
                turn.record(Turn.TurnAnswered, at=at, text="done", steps=0)
                turns.append(turn)
            log.save(*turns)
    finally:
        log.close()


def test_eight_read_commands_at_once_all_succeed(origin: Home, tmp_path: Path) -> None:
    home = copy_of(origin, tmp_path)
    add_turns(home, 6000)
    expected = turn_ids(home)
    for attempt in range(3):
        # No views: every command folds the whole log into them at the same moment.
        shutil.rmtree(home.data / "views")
        shutil.rmtree(home.data / "turns", ignore_errors=True)
        shutil.rmtree(home.data / ".audit", ignore_errors=True)
        procs = [home.spawn("turns", "list", "--json") for _ in range(8)]
        results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
        failed = [(code, err) for code, _, err in results if code != 0]
        assert failed == [], f"attempt {attempt}: {len(failed)} of 8 failed: {failed[0][1][-400:]}"
        for _, out, _ in results:
            assert sorted(t["id"] for t in orjson.loads(out)) == expected
    # Folded once each, not once per process: no audit or turn line twice.
    audit_has_no_line_twice(home)


def test_a_log_file_cut_short_is_refused_untouched(origin: Home, tmp_path: Path) -> None:
    home = copy_of(origin, tmp_path)
    data = home.data / "log" / "data.mdb"
    with open(data, "r+b") as f:
        f.truncate(data.stat().st_size // 2)
    cut = data.read_bytes()
    done = home.run("turns", "list")
    assert done.returncode == 2, (done.returncode, done.stderr)  # not -SIGBUS
    assert str(data) in done.stderr and "cut short" in done.stderr and "Restore it from a backup" in done.stderr
    assert "Traceback" not in done.stderr
    assert data.read_bytes() == cut


def test_an_emptied_log_with_a_history_is_refused_not_replaced(origin: Home, tmp_path: Path) -> None:
    home = copy_of(origin, tmp_path)
    data = home.data / "log" / "data.mdb"
    data.write_bytes(b"")
    for command in (("turns", "list"), ("events",), ("ask", "anything")):
        with ScriptedLLM([text("never asked")]) as llm:
            done = home.run(*command, METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
        assert done.returncode == 2, (command, done.returncode, done.stdout, done.stderr)
        assert str(data) in done.stderr and "is empty" in done.stderr and "Restore" in done.stderr, done.stderr
        assert data.stat().st_size == 0, f"{command} wrote into the emptied log"


def test_a_fresh_workspace_still_starts(tmp_path: Path) -> None:
    home = initialised(tmp_path)
    assert turn_ids(home) == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"a small tmpfs cannot be mounted here ({done.stderr.strip() or 'mount failed'}): the full-disk tests need one")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Every free block taken (unbuffered writes: a buffered file would fail again on close)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_read_commands_work_on_a_full_disk_and_views_catch_up_later(origin: Home, small_disk: Path, tmp_path: Path) -> None:
    staged = copy_of(origin, tmp_path)
    # Views left behind the log: the read command has folding to do, and no room to save it.
    old_views = tmp_path / "old-views"
    shutil.copytree(staged.data / "views", old_views)
    with ScriptedLLM([call("write_files", {"files": [{"path": "~/f3.txt", "content": "v3"}]}), text("done")]) as llm:
        done = staged.run("ask", "write f3", "--yes", "--json", METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
    assert done.returncode == 0, done.stderr
    expected = turn_ids(staged)
    shutil.rmtree(staged.data / "views")
    (staged.data / "views").mkdir()
    shutil.copy(old_views / "lock.mdb", staged.data / "views")
    # Compacted: no free page left inside the file, so saving a view must grow it.
    env = lmdb.open(str(old_views), max_dbs=128, readonly=True, lock=False)
    env.copy(str(staged.data / "views"), compact=True)
    env.close()
    shutil.copytree(staged.root, small_disk / "home", symlinks=True)
    home = Home(small_disk / "home")

    filler = fill(small_disk)
    listed = home.run("turns", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(t["id"] for t in orjson.loads(listed.stdout)) == expected
    shown = home.run("turns", "show", expected[-1])
    assert shown.returncode == 0, shown.stderr

    filler.unlink()
    assert turn_ids(home) == expected


def test_a_failed_write_names_what_was_not_written(small_disk: Path) -> None:
    from domain.turn import Turn
    from metnos.mechanisms.eventlog import EventLog
    from metnos.mechanisms.store.errors import LogUnavailable
    from metnos.settings.workspace import Workspace

    ws = Workspace(data_dir=small_disk / "data", config_dir=small_disk / "config")
    log = EventLog(ws, env={"LMDB_MAP_SIZE": str(64 * 1024 * 1024)})
    try:
        turn = Turn.start(id=__import__("uuid").uuid4(), at=__import__("datetime").datetime.now(__import__("datetime").UTC),
                          text="kept", actor="test", channel="test", mode="live", settings={}, runtime_version="test")
        log.save(turn)
        fill(small_disk)
        turn.record(Turn.TurnAnswered, at=turn.modified_on, text=os.urandom(4 << 20).hex(), steps=0)
        with pytest.raises(LogUnavailable) as caught:
            log.save(turn)
        message = str(caught.value)
        assert "full" in message and f"Not written: Turn {str(turn.id)[:8]}: TurnAnswered" in message
        assert "Everything recorded before is in the log" in message
        assert [type(e).__name__ for e in log.events.get(turn.id)] == ["TurnStarted"]
    finally:
        log.close()


def audit_has_no_line_twice(home: Home) -> None:
    for folder in ("turns", ".audit"):
        for day in (home.data / folder).rglob("*.jsonl"):
            lines = day.read_bytes().splitlines()
            assert len(lines) == len(set(lines)), f"{day} has lines written twice"


def test_a_killed_rebuild_leaves_nothing_the_next_command_cannot_finish(origin: Home, tmp_path: Path) -> None:
    import random
    import signal
    import time

    home = copy_of(origin, tmp_path)
    add_turns(home, 6000)
    expected = turn_ids(home)
    started = time.monotonic()
    done = home.run("rebuild")
    assert done.returncode == 0, done.stderr
    whole = time.monotonic() - started
    rng = random.Random(5)
    for _ in range(3):
        proc = home.spawn("rebuild")
        time.sleep(rng.uniform(0.3, 0.95) * whole)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        # Read commands at once after the kill: they fold what the rebuild left, one at a time.
        readers = [home.spawn("turns", "list", "--json") for _ in range(3)]
        for reader in readers:
            out, err = reader.communicate(timeout=300)
            assert reader.returncode == 0, err
            assert sorted(t["id"] for t in orjson.loads(out)) == expected
        audit_has_no_line_twice(home)
    done = home.run("rebuild")
    assert done.returncode == 0, done.stderr
    assert turn_ids(home) == expected


def test_four_asks_and_four_read_commands_at_once_beside_a_running_daemon_all_succeed(origin: Home, tmp_path: Path) -> None:
    import signal
    import time

    home = copy_of(origin, tmp_path)
    before = turn_ids(home)
    daemon = home.spawn("daemon", "--tick", "0.2", "--skip-birth", "--http", "127.0.0.1:0")
    time.sleep(2)
    assert daemon.poll() is None, daemon.communicate()
    servers = [ScriptedLLM([call("write_files", {"files": [{"path": f"~/c{n}.txt", "content": f"c{n}"}]}), text("done")]) for n in range(4)]
    for server in servers:
        server.__enter__()
    try:
        asks = [home.spawn("ask", f"write c{n}", "--yes", "--json", METNOS_LLM_URL=s.url, METNOS_LLM_MODEL="scripted") for n, s in enumerate(servers)]
        reads = [home.spawn("turns", "list", "--json") for _ in range(4)]
        results = [(p, *p.communicate(timeout=300)) for p in asks + reads]
    finally:
        for server in servers:
            server.__exit__(None, None, None)
    failed = [err[-400:] for p, _, err in results if p.returncode != 0]
    assert failed == []
    assert daemon.poll() is None, "the daemon stopped while the asks ran"
    daemon.send_signal(signal.SIGTERM)
    _, daemon_err = daemon.communicate(timeout=60)
    assert "Traceback" not in daemon_err and "not greater than the recorded" not in daemon_err, daemon_err
    new = {orjson.loads(out)["turn_id"] for _, out, _ in results[:4]}
    assert sorted(set(before) | new) == turn_ids(home)
    assert all((home.user / f"c{n}.txt").read_text() == f"c{n}" for n in range(4))
    audit_has_no_line_twice(home)


def test_an_ask_on_a_full_disk_says_what_was_not_written_and_works_once_there_is_room(origin: Home, small_disk: Path) -> None:
    shutil.copytree(origin.root, small_disk / "home", symlinks=True)
    home = Home(small_disk / "home")
    before = turn_ids(home)
    filler = fill(small_disk)
    script = [call("write_files", {"files": [{"path": "~/full.txt", "content": "x" * 1000}]}), text("done")]
    with ScriptedLLM(script) as llm:
        done = home.run("ask", "write full", "--yes", METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "is full" in done.stderr and "Not written: Turn " in done.stderr and "TurnStarted" in done.stderr, done.stderr
    assert "Everything recorded before is in the log" in done.stderr and "Traceback" not in done.stderr
    assert not (home.user / "full.txt").exists()  # nothing ran that the log could not record

    filler.unlink()
    assert turn_ids(home) == before
    with ScriptedLLM(script) as llm:
        done = home.run("ask", "write full", "--yes", METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
    assert done.returncode == 0, done.stderr
    assert (home.user / "full.txt").exists() and len(turn_ids(home)) == len(before) + 1
