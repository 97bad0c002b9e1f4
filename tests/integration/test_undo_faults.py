"""Undo under faults, with real processes (issue 18 items 2 and 6).

A kept file gone from the blob store refuses the undo before anything is
touched; a killed undo leaves nothing in the user's folders and the next
``undo`` finishes it without ``--force``; bytes, modes and modification times
come back; delete_files and move_files act on a symlink itself.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.cli_process import Home, initialised
from tests.support.scripted_llm import ScriptedLLM, call, text

# Kills, damaged files and full disks with real processes: their own CI step (.ci/faults).
pytestmark = pytest.mark.faults

OLD = 978_307_200_123_456_789  # 2001-01-01, to the nanosecond


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    yield initialised(tmp_path_factory.mktemp("undo-faults"))


def ask(home: Home, step: dict, request: str) -> str:
    with ScriptedLLM([step, text("done")]) as llm:
        done = home.run("ask", request, "--yes", "--json", METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)["turn_id"]


def undone(home: Home, turn_id: str) -> bool:
    listed = home.run("turns", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return next(t for t in orjson.loads(listed.stdout) if t["id"] == turn_id)["undone"]


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root: kind, bytes or target, mode, modification time."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            if p.is_symlink():
                out[str(p.relative_to(root))] = ("link", os.readlink(p), st.st_mtime_ns)
            elif p.is_file():
                out[str(p.relative_to(root))] = ("file", p.read_bytes(), st.st_mode & 0o7777, st.st_mtime_ns)
            else:
                out[str(p.relative_to(root))] = ("dir", st.st_mode & 0o7777)
    return out


def leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if "metnos-undo" in p.name]


def blob_path(home: Home, digest: str) -> Path:
    hexa = digest.split(":", 1)[1]
    return home.data / "blobs" / hexa[:2] / hexa[2:]


def test_a_missing_or_damaged_kept_file_refuses_the_undo_and_touches_nothing(home: Home) -> None:
    import blake3

    area = home.user / "lost"
    area.mkdir()
    keep = {"a.txt": b"the only copy of a", "b.txt": b"the only copy of b"}
    for name, data in keep.items():
        (area / name).write_bytes(data)
    turn_id = ask(home, call("write_files", {"files": [
        {"path": f"~/lost/{name}", "content": "gone", "mode": "overwrite"} for name in keep
    ]}), "overwrite both")
    a_blob = blob_path(home, "blake3:" + blake3.blake3(keep["a.txt"]).hexdigest())
    b_blob = blob_path(home, "blake3:" + blake3.blake3(keep["b.txt"]).hexdigest())
    a_blob.unlink()
    b_blob.write_bytes(b"\x28\xb5\x2f\xfd" + os.urandom(40))  # a zstd frame header, then garbage
    after = snapshot(area)

    done = home.run("undo")
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "2 kept file(s) this undo needs are missing or damaged" in done.stderr and "nothing was changed" in done.stderr
    assert "~/lost/a.txt" in done.stdout and "is not in the store" in done.stdout
    assert "~/lost/b.txt" in done.stdout and "damaged" in done.stdout
    assert snapshot(area) == after
    assert not undone(home, turn_id)

    shown = home.run("undo", "--dry-run", "--json")
    assert shown.returncode == 1 and len(orjson.loads(shown.stdout)["lost"]) == 2
    # Put back, the blobs make the undo possible again.
    a_blob.parent.mkdir(parents=True, exist_ok=True)
    from metnos.mechanisms.blobs import BlobStore

    store = BlobStore(home.data / "blobs")
    b_blob.unlink()
    for data in keep.values():
        store.put(data)
    done = home.run("undo")
    assert done.returncode == 0, done.stderr
    assert {n: (area / n).read_bytes() for n in keep} == keep
    assert undone(home, turn_id)


def test_bytes_modes_and_times_come_back(home: Home) -> None:
    area = home.user / "times"
    (area / "deep").mkdir(parents=True)
    for n, mode in enumerate((0o600, 0o640, 0o755)):
        f = area / "deep" / f"f{n}.txt"
        f.write_bytes(os.urandom(100 + n))
        f.chmod(mode)
        os.utime(f, ns=(OLD, OLD + n))
    os.utime(area / "deep", ns=(OLD, OLD + 7))
    before = snapshot(area)
    ask(home, call("write_files", {"files": [
        {"path": f"~/times/deep/f{n}.txt", "content": "new", "mode": "overwrite"} for n in range(3)
    ]}), "overwrite three")
    ask(home, call("delete_files", {"paths": ["~/times/deep"], "recursive": True}), "delete the folder")
    assert not (area / "deep").exists()
    for _ in range(2):
        done = home.run("undo")
        assert done.returncode == 0, done.stderr
    assert snapshot(area) == before


def test_delete_and_move_act_on_a_symlink_itself_and_undo_brings_the_link_back(home: Home) -> None:
    area = home.user / "links"
    area.mkdir()
    target = area / "target.txt"
    target.write_bytes(b"the target's bytes")
    (area / "gone").symlink_to("target.txt")
    (area / "moved").symlink_to("target.txt")
    before = snapshot(area)

    ask(home, call("delete_files", {"paths": ["~/links/gone"]}), "delete the link")
    assert not os.path.lexists(area / "gone") and target.read_bytes() == b"the target's bytes"
    ask(home, call("move_files", {"moves": [{"src": "~/links/moved", "dst": "~/links/renamed"}]}), "rename the link")
    assert os.readlink(area / "renamed") == "target.txt" and target.read_bytes() == b"the target's bytes"
    assert not os.path.lexists(area / "moved")

    for _ in range(2):
        done = home.run("undo")
        assert done.returncode == 0, done.stderr
    assert snapshot(area) == before


def journal_progress(log, turn_id: str) -> tuple[int, bool] | None:
    """(paths recorded back, finished) of the undo of ``turn_id``; None before it starts."""
    from domain.undo import journal_id

    names = [type(e).__name__ for e in log.events.get(journal_id(turn_id))]
    if not names:
        return None
    return names.count("UndoPathRestored"), "UndoFinished" in names


def kill_mid_undo(home: Home, turn_id: str, *, after_paths: int, rng: random.Random) -> tuple[int, bool] | None:
    """Start ``metnos undo``, SIGKILL it once ``after_paths`` paths are recorded back (then a random moment more)."""
    from metnos.mechanisms.eventlog import EventLog
    from metnos.settings.workspace import Workspace

    log = EventLog(Workspace(data_dir=home.data, config_dir=home.metnos_home / "config"))
    try:
        proc = home.spawn("undo", turn_id)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            seen = journal_progress(log, turn_id)
            if seen is not None and seen[0] >= after_paths:
                break
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.03))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        return journal_progress(log, turn_id)
    finally:
        log.close()


def many_files(area: Path, rng: random.Random, count: int) -> None:
    for n in range(count):
        folder = area / f"d{n % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        f = folder / f"f{n}.bin"
        f.write_bytes(os.urandom(rng.randrange(1, 200_000)))
        f.chmod(rng.choice((0o600, 0o640, 0o644, 0o755)))
        os.utime(f, ns=(OLD, OLD + n * 1_000_003))


def test_a_killed_undo_leaves_nothing_in_the_users_folders_and_the_next_one_finishes_it(home: Home) -> None:
    rng = random.Random(18)
    cut_short = 0
    for cycle in range(4):
        area = home.user / f"killed{cycle}"
        many_files(area, rng, 40)
        before = snapshot(area)
        if cycle % 2 == 0:
            turn_id = ask(home, call("write_files", {"files": [
                {"path": f"~/killed{cycle}/d{n % 4}/f{n}.bin", "content": f"overwritten {n}", "mode": "overwrite"} for n in range(40)
            ]}), "overwrite forty")
            after_paths = rng.randrange(1, 38)
        else:
            # One path, a whole tree: the kill lands inside putting the folder back.
            turn_id = ask(home, call("delete_files", {"paths": [f"~/killed{cycle}"], "recursive": True}), "delete the tree")
            after_paths = 0
        progress = kill_mid_undo(home, turn_id, after_paths=after_paths, rng=rng)
        if progress is not None and not progress[1]:
            cut_short += 1
        assert leftovers(home.user) == [], f"cycle {cycle}: staging left in the user's folders"

        done = home.run("undo", turn_id)
        assert done.returncode == 0, (cycle, progress, done.stdout, done.stderr)
        assert snapshot(area) == before, f"cycle {cycle}: killed at {progress}"
        assert leftovers(home.user) == []
        assert not (home.data / ".runtime" / "undo" / turn_id).exists()
        assert undone(home, turn_id)
    assert cut_short >= 2, "the kills all missed the undo: the test proved nothing"


def test_a_plain_undo_after_a_killed_one_finishes_it_before_anything_else(home: Home) -> None:
    rng = random.Random(7)
    area = home.user / "first"
    many_files(area, rng, 30)
    before = snapshot(area)
    for _ in range(3):
        turn_id = ask(home, call("write_files", {"files": [
            {"path": f"~/first/d{n % 4}/f{n}.bin", "content": "later", "mode": "overwrite"} for n in range(30)
        ]}), "overwrite thirty")
        progress = kill_mid_undo(home, turn_id, after_paths=rng.randrange(1, 25), rng=rng)
        if progress is not None and not progress[1]:
            break
        assert home.run("undo", turn_id).returncode == 0  # the kill missed: finish, and try again
    else:
        pytest.fail("three kills all missed the undo")
    later = ask(home, call("write_files", {"files": [{"path": "~/first-later.txt", "content": "kept"}]}), "a later turn")

    done = home.run("undo", "--json")
    assert done.returncode == 0, done.stderr
    result = orjson.loads(done.stdout)
    assert result["turn_id"] == turn_id and result["resuming"] is True
    assert snapshot(area) == before
    assert (home.user / "first-later.txt").read_text() == "kept" and not undone(home, later)
