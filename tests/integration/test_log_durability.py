"""What the log promises beyond the eventsourcing contract."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from uuid import uuid4

import lmdb
import pytest
from eventsourcing.persistence import StoredEvent

from metnos.mechanisms.store import environment as environments
from metnos.mechanisms.store.errors import CorruptRecord, LogFromNewerVersion, LogUnavailable
from metnos.mechanisms.store.lmdb import LMDBApplicationRecorder, LMDBFactory

REPO = Path(__file__).resolve().parents[2]


def events(originator, n, start=1, topic="test:event"):
    return [StoredEvent(originator_id=originator, originator_version=v, topic=topic, state=b'{"v":%d}' % v) for v in range(start, start + n)]


def open_recorder(path: Path, **kw) -> tuple[environments.SharedEnvironment, LMDBApplicationRecorder]:
    shared = environments.acquire(path, **kw)
    return shared, LMDBApplicationRecorder(shared, "shared_events")


def writer(path: Path, name: str, batches: int, size: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.log_writer", str(path), name, str(batches), str(size)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_everything_committed_survives_close_and_reopen(tmp_path: Path) -> None:
    shared, recorder = open_recorder(tmp_path)
    a, b = uuid4(), "string-id"
    recorder.insert_events(events(a, 3))
    recorder.insert_events(events(b, 2))
    environments.release(shared)

    shared, recorder = open_recorder(tmp_path)
    try:
        assert [e.originator_version for e in recorder.select_events(a)] == [1, 2, 3]
        assert [e.originator_id for e in recorder.select_events(b)] == [b, b]
        assert recorder.max_notification_id() == 5
        assert [n.id for n in recorder.select_notifications(None, 10)] == [1, 2, 3, 4, 5]
    finally:
        environments.release(shared)


def test_one_environment_per_path_per_process(tmp_path: Path) -> None:
    first = environments.acquire(tmp_path)
    second = environments.acquire(tmp_path / "." )
    try:
        assert first is second
    finally:
        environments.release(first)
        environments.release(second)


def test_two_processes_appending_at_once_lose_nothing_and_never_interleave(tmp_path: Path) -> None:
    batches, size = 60, 5
    procs = [writer(tmp_path, name, batches, size) for name in ("alpha", "beta")]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    shared, recorder = open_recorder(tmp_path)
    try:
        notes = recorder.select_notifications(None, 10_000)
        ids = [n.id for n in notes]
        assert ids == list(range(1, 2 * batches * size + 1))
        for name in ("alpha", "beta"):
            mine = [n for n in notes if n.topic == f"test:{name}"]
            assert [n.originator_version for n in mine] == list(range(1, batches * size + 1))
            # Each batch holds consecutive ids: the other writer never cut in.
            for i in range(0, len(mine), size):
                chunk = [n.id for n in mine[i : i + size]]
                assert chunk == list(range(chunk[0], chunk[0] + size))
    finally:
        environments.release(shared)


def test_a_writer_killed_mid_batch_leaves_all_or_nothing(tmp_path: Path) -> None:
    size = 40_000
    outcomes = set()
    for attempt, delay in enumerate((0.02, 0.08, 0.15)):
        path = tmp_path / f"run{attempt}"
        proc = writer(path, "victim", 1, size)
        assert proc.stdout.readline().strip() == "ready"
        assert proc.stdout.readline().strip() == "batch"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        shared, recorder = open_recorder(path)
        try:
            count = len(recorder.select_notifications(None, size + 1))
            assert count in (0, size)
            outcomes.add(count)
            # The log is still writable after the killed writer.
            recorder.insert_events(events(uuid4(), 1))
        finally:
            environments.release(shared)
    assert outcomes


def test_a_corrupt_record_is_named_not_a_deep_traceback(tmp_path: Path) -> None:
    shared, recorder = open_recorder(tmp_path)
    try:
        # Two commits, a record each: the second spoiled, the first must read on.
        first, second = events(uuid4(), 2)
        recorder.insert_events([first])
        recorder.insert_events([second])
        db = shared.db("shared_events.notifications")
        shared.write(lambda txn: txn.put((2).to_bytes(8, "big"), b"\x07garbage", db=db))
        with pytest.raises(CorruptRecord) as info:
            recorder.select_notifications(None, 10)
        assert "shared_events.notifications" in str(info.value)
        assert "0000000000000002" in str(info.value)
        assert "unknown record format 7" in str(info.value)
        shared.write(lambda txn: txn.put((2).to_bytes(8, "big"), b"\x01", db=db))
        with pytest.raises(CorruptRecord, match="shorter than a header"):
            recorder.select_notifications(2, 1)
        # Record 1 is untouched.
        assert recorder.select_notifications(1, 1)[0].originator_version == 1
    finally:
        environments.release(shared)


def test_a_log_from_a_newer_version_is_refused_and_left_alone(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path), max_dbs=8)
    meta = env.open_db(b"metnos.meta")
    with env.begin(write=True) as txn:
        txn.put(b"log_format", b"99", db=meta)
    env.close()
    with pytest.raises(LogFromNewerVersion, match="newer Metnos .* upgrade Metnos"):
        LMDBFactory({"LMDB_PATH": str(tmp_path)})
    env = lmdb.open(str(tmp_path), max_dbs=8)
    meta = env.open_db(b"metnos.meta")
    with env.begin() as txn:
        assert txn.get(b"log_format", db=meta) == b"99"
    env.close()


def test_the_map_grows_by_itself_and_no_commit_is_lost(tmp_path: Path) -> None:
    shared = environments.acquire(tmp_path, map_size=64 * 1024, sync=False)
    recorder = LMDBApplicationRecorder(shared, "shared_events")
    try:
        big = b"x" * 2000
        originator = uuid4()
        for v in range(1, 301):
            recorder.insert_events([StoredEvent(originator, v, "test:big", big)])
        assert shared.map_size() > 64 * 1024
        assert len(recorder.select_events(originator)) == 300
    finally:
        environments.release(shared)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_an_unwritable_folder_is_one_clear_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(LogUnavailable, match="permission denied|cannot"):
        environments.acquire(locked / "log")


def test_an_unwritable_folder_is_one_clear_line_even_as_root(tmp_path: Path) -> None:
    # A regular file where the log's folder should be cannot be opened by anyone.
    blocker = tmp_path / "log"
    blocker.write_text("not a folder")
    with pytest.raises(LogUnavailable, match="cannot open the log"):
        environments.acquire(blocker / "inner")


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return result.returncode == 0


def test_a_full_disk_is_a_clear_error_and_keeps_what_was_committed(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    if not _mount_tmpfs(mount, "2m"):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        shared = environments.acquire(mount / "log", map_size=64 * 1024 * 1024, sync=True)
        recorder = LMDBApplicationRecorder(shared, "shared_events")
        originator = uuid4()
        recorder.insert_events(events(originator, 5))
        blob = os.urandom(256 * 1024)
        with pytest.raises(LogUnavailable, match="full"):
            for v in range(6, 200):
                recorder.insert_events([StoredEvent(originator, v, "test:big", blob)])
        committed = recorder.select_events(originator)
        assert [e.originator_version for e in committed[:5]] == [1, 2, 3, 4, 5]
        assert all(e.state == blob for e in committed[5:])
        environments.release(shared)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize(("key", "value", "says"), [
    ("LMDB_MAP_SIZE", "abc", "positive whole number of bytes"),
    ("LMDB_POLL_INTERVAL", "-1", "positive number of seconds"),
    ("LMDB_SYNC", "maybe", "yes or no"),
])
def test_a_bad_setting_is_one_line_naming_it(tmp_path: Path, key: str, value: str, says: str) -> None:
    from metnos.mechanisms.store.errors import BadLogSetting

    with pytest.raises(BadLogSetting, match=f"{key}='{value}' is not .*{says}"):
        LMDBFactory({"LMDB_PATH": str(tmp_path), key: value})


def test_an_unknown_persistence_module_is_one_line(metnos_home, monkeypatch, capsys) -> None:
    from metnos.adapters.cli import main

    monkeypatch.setenv("PERSISTENCE_MODULE", "no.such.module")
    assert main(["events"]) == 2
    err = capsys.readouterr().err
    assert "PERSISTENCE_MODULE='no.such.module' is not a usable persistence module" in err and "Traceback" not in err


def test_a_filtered_scan_crosses_batches_where_nothing_matches(tmp_path: Path) -> None:
    shared, recorder = open_recorder(tmp_path, sync=False)
    try:
        a, b = uuid4(), uuid4()
        recorder.insert_events(events(a, 50, topic="test:wanted"))
        recorder.insert_events(events(b, 500, topic="test:other"))
        recorder.insert_events(events(a, 50, start=51, topic="test:wanted"))
        rows = list(recorder.scan(1, batch=7, topics=frozenset({"test:wanted"})))
        assert [r[0] for r in rows] == list(range(1, 51)) + list(range(551, 601))
        assert all(r[1] == a and r[3] == "test:wanted" for r in rows)
        assert [r[0] for r in recorder.scan(590, batch=3)] == list(range(590, 601))
    finally:
        environments.release(shared)
