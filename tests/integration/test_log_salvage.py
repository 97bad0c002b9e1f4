"""A damaged log checked and salvaged, with real processes and a real LMDB file (issue 34 item 4).

The damage is the fault suite's: random bytes over a page of the log, the data file cut short,
one record whose bytes are not a record. Before the damage every turn and its events are listed;
afterwards `log check` must name the damaged positions and the turns they held, every read
command must point at `log check` and `log salvage`, and `log salvage` must bring back every
turn the damage did not touch, event for event, close the touched ones as damaged, and leave the
old log as it was.
"""

from __future__ import annotations

import random
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import lmdb
import orjson
import pytest

from tests.integration.test_log_faults import add_turns, copy_of
from tests.support.cli_process import Home, initialised
from tests.support.scripted_llm import ScriptedLLM, call, text

# Kills, damaged files and full disks with real processes: their own CI step (.ci/faults).
pytestmark = pytest.mark.faults

READ_COMMANDS = (("turns", "list"), ("events",), ("rebuild",), ("replay", "--all"))


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    """Two turns asked for real (a file written), then many recorded straight into the log."""
    home = initialised(tmp_path_factory.mktemp("salvage"))
    for n in (1, 2):
        with ScriptedLLM([call("write_files", {"files": [{"path": f"~/f{n}.txt", "content": f"v{n}"}]}), text("done")]) as llm:
            done = home.run("ask", f"write f{n}", "--yes", "--json", METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
        assert done.returncode == 0, done.stderr
    add_turns(home, 400)
    yield home


def events_by_aggregate(home: Home) -> dict[str, list[dict]]:
    """Every event of the log, grouped by aggregate, without its position (a salvage renumbers);
    the views folded too, as a workspace in use has them."""
    turns_of(home)
    listed = home.run("events", "--json")
    assert listed.returncode == 0, listed.stderr
    grouped: dict[str, list[dict]] = {}
    for line in listed.stdout.splitlines():
        row = orjson.loads(line)
        grouped.setdefault(row["aggregate_id"], []).append({k: v for k, v in row.items() if k != "id"})
    return grouped


def positions(home: Home) -> dict[int, str]:
    listed = home.run("events", "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["id"]: row["aggregate_id"] for row in map(orjson.loads, listed.stdout.splitlines())}


def turns_of(home: Home) -> dict[str, dict]:
    listed = home.run("turns", "list", "--json", "--limit", "100000")
    assert listed.returncode == 0, listed.stderr
    return {t["id"]: t for t in orjson.loads(listed.stdout)}


def check(home: Home) -> dict:
    done = home.run("log", "check", "--json")
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    return orjson.loads(done.stdout)


def assert_reads_name_check_and_salvage(home: Home) -> None:
    """Each read command, on views that must be folded again from the log: each meets the damage."""
    for command in (*READ_COMMANDS, ("turns", "show", "01")):
        for derived in ("views", "turns", ".audit"):
            shutil.rmtree(home.data / derived, ignore_errors=True)
        done = home.run(*command)
        assert done.returncode == 2, (command, done.returncode, done.stderr[-600:])
        assert "metnos log check" in done.stderr and "metnos log salvage NEW_DIR" in done.stderr, (command, done.stderr)
        assert "Traceback" not in done.stderr and "unexpected error" not in done.stderr, done.stderr


def salvage_and_compare(home: Home, before: dict[str, list[dict]], lost_positions: set[int], owner: dict[int, str]) -> dict:
    """Salvage into a new data folder beside the old, swap them, and compare turn by turn."""
    old_log = (home.data / "log" / "data.mdb").read_bytes()
    new_dir = home.metnos_home / "salvaged"
    done = home.run("log", "salvage", str(new_dir), "--json")
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert (home.data / "log" / "data.mdb").read_bytes() == old_log, "the salvage wrote into the damaged log"

    touched = {owner[p] for p in lost_positions if p in owner}
    whole = turn_ids(before) - touched
    assert whole, "the damage touched every turn: nothing to show"
    assert set(report["turns_whole"]) == whole

    shutil.move(home.data, home.metnos_home / "damaged")
    shutil.move(new_dir, home.data)
    after = events_by_aggregate(home)
    for turn_id in whole:
        assert after[turn_id] == before[turn_id], f"turn {turn_id} did not come back event for event"
    turns = turns_of(home)
    for turn_id in set(report["turns_cut"]):
        assert turn_id in touched
        assert turns[turn_id]["status"] == "abandoned"
        assert after[turn_id][-1]["state"]["reason"].startswith("damaged: the log was damaged"), after[turn_id][-1]
    assert set(turns) == whole | set(report["turns_cut"])
    assert home.run("log", "check").returncode == 0
    listed = home.run("replay", "--all")
    assert "Traceback" not in listed.stderr and "metnos log check" not in listed.stderr, listed.stderr
    return report


def turn_ids(events: dict[str, list[dict]]) -> set[str]:
    return {a for a, listed in events.items() if listed[0]["topic"].endswith("Turn.TurnStarted")}


def leaf_pages_with_positions(data_file: Path) -> list[int]:
    """Pages whose header says leaf and whose first node has an 8-byte key: where positions live."""
    raw = data_file.read_bytes()
    size = struct.unpack_from("<I", raw, 40)[0]
    found = []
    for number in range(2, len(raw) // size):
        pgno, _, flags, lower, _ = struct.unpack_from("<QHHHH", raw, number * size)
        if pgno == number and flags & 0x02 and lower > 16:
            first = struct.unpack_from("<H", raw, number * size + 16)[0]
            if struct.unpack_from("<H", raw, number * size + first + 6)[0] == 8:
                found.append(number)
    return found


def test_random_bytes_over_a_page_every_untouched_turn_comes_back(origin: Home, tmp_path: Path) -> None:
    home = copy_of(origin, tmp_path)
    before = events_by_aggregate(home)
    owner = positions(home)
    data = home.data / "log" / "data.mdb"
    pristine = data.read_bytes()
    rng = random.Random(34)
    candidates = leaf_pages_with_positions(data)
    rng.shuffle(candidates)
    size = struct.unpack_from("<I", pristine, 40)[0]
    for page in candidates:
        damaged = bytearray(pristine)
        damaged[page * size : (page + 1) * size] = rng.randbytes(size)
        data.write_bytes(damaged)
        if home.run("events").returncode != 0:
            break  # a page the log still uses (an older copy changes nothing)
    else:
        pytest.fail("no page of the log held positions")
    found = check(home)
    lost = set(owner) - set(found["intact_positions"])
    assert lost and {d["position"] for d in found["damage"] if not d["recovered"]} == lost
    assert set(found["turns"]) == {owner[p] for p in lost} & turn_ids(before)
    shown = home.run("log", "check")
    assert shown.returncode == 1 and "is damaged" in shown.stdout and "metnos log salvage NEW_DIR" in shown.stdout
    assert_reads_name_check_and_salvage(home)
    salvage_and_compare(home, before, lost, owner)


def test_a_cut_data_file_every_turn_before_the_cut_comes_back(origin: Home, tmp_path: Path) -> None:
    home = copy_of(origin, tmp_path)
    before = events_by_aggregate(home)
    owner = positions(home)
    data = home.data / "log" / "data.mdb"
    with open(data, "r+b") as f:
        f.truncate(data.stat().st_size * 3 // 4)
    found = check(home)
    assert any("cut short" in note for note in found["notes"])
    lost = set(owner) - set(found["intact_positions"])
    # A commit's records are compressed together (log format 2): the 800 events recorded last are a few pages at
    # the file's end, and a cut of its last quarter may take them all. What must hold is below: the cut kept
    # events, lost others, and every turn before it comes back.
    assert found["intact_positions"], "the cut kept no event"
    assert lost and lost <= {d["position"] for d in found["damage"] if not d["recovered"]} | set(range(max(found["intact_positions"]), len(owner) + 1))
    for command in READ_COMMANDS:
        done = home.run(*command)
        assert done.returncode == 2 and "cut short" in done.stderr and "metnos log salvage NEW_DIR" in done.stderr, done.stderr
    salvage_and_compare(home, before, lost, owner)


def test_one_overwritten_value_is_named_and_its_earlier_copy_on_the_pages_brings_its_turns_back(origin: Home, tmp_path: Path) -> None:
    from metnos.mechanisms.store.record_batches import held

    home = copy_of(origin, tmp_path)
    before = events_by_aggregate(home)
    owner = positions(home)
    # The value that holds the answer of a turn in the middle of the log (its records, or a commit's batch of
    # them), overwritten with bytes that are no record. LMDB writes the changed page anew; the page that held
    # the value before is still in the file.
    turns = sorted(turn_ids(before), key=lambda t: max(p for p, a in owner.items() if a == t))
    answer = max(p for p, a in owner.items() if a == turns[len(turns) // 2])
    env = lmdb.open(str(home.data / "log"), max_dbs=128)
    with env.begin(write=True) as txn:
        table = env.open_db(b"metnos_events.notifications", txn=txn)
        with txn.cursor(db=table) as cursor:
            assert cursor.set_range(answer.to_bytes(8, "big"))
            key, value = cursor.item()
        first, records = held("metnos_events.notifications", key, value)
        txn.put(key, b"\x07" + b"\x00" * 40, db=table)
    env.close()
    target = int.from_bytes(key, "big")
    spoiled = list(range(first, first + len(records)))
    assert answer in spoiled
    found = check(home)
    assert [(d["position"], d["recovered"]) for d in found["damage"]] == [(p, True) for p in spoiled]
    assert "unknown record format 7" in found["damage"][-1]["reason"] and found["turns"] == []
    shown = home.run("log", "check")
    named = f"events {spoiled[0]}-{target}: " if len(spoiled) > 1 else f"event {target}: "
    assert named in shown.stdout and "found whole on the file's pages" in shown.stdout, shown.stdout
    assert_reads_name_check_and_salvage(home)
    report = salvage_and_compare(home, before, set(), owner)
    assert report["turns_cut"] == {} and turns[len(turns) // 2] in report["turns_whole"]


def test_a_record_whose_contents_no_longer_decode_is_named_by_every_read(origin: Home, tmp_path: Path) -> None:
    from metnos.mechanisms.eventlog import EventLog
    from metnos.mechanisms.store.records import _HEAD
    from metnos.settings.workspace import Workspace
    from tests.support.log_surgery import record_at, replace_record

    home = copy_of(origin, tmp_path)
    owner = positions(home)
    target = sorted(owner)[len(owner) // 2]
    log = EventLog(Workspace(data_dir=home.data, config_dir=home.metnos_home / "config"))
    try:
        recorder = log.recorder

        def garble(txn) -> None:
            value = record_at(txn, recorder, target)
            _, oid_len, topic_len, _ = _HEAD.unpack_from(value)
            state_at = _HEAD.size + oid_len + topic_len  # the header stays whole: only the event's own bytes are garbled
            replace_record(txn, recorder, target, value[:state_at] + b"\x01{not json" + value[state_at + 11 :])

        recorder.shared.write(garble)
    finally:
        log.close()
    found = check(home)
    [damage] = [d for d in found["damage"] if d["position"] == target]
    assert "its contents cannot be decoded" in damage["reason"] and damage["aggregate"] == owner[target]
    assert_reads_name_check_and_salvage(home)


def test_a_turn_whose_answer_is_garbled_in_every_copy_is_cut_and_closed_as_damaged(origin: Home, tmp_path: Path) -> None:
    from datetime import UTC, datetime
    from uuid import uuid4

    from domain.turn import Turn
    from metnos.mechanisms.eventlog import EventLog
    from metnos.settings.workspace import Workspace

    home = copy_of(origin, tmp_path)
    marker = "an answer found once in the file " + uuid4().hex
    log = EventLog(Workspace(data_dir=home.data, config_dir=home.metnos_home / "config"))
    try:
        turn = Turn.start(id=uuid4(), at=datetime.now(UTC), text="the turn to cut", actor="test", channel="test", mode="live",
                          settings={}, runtime_version="test")
        log.save(turn)
        # The answer in a commit of its own, a record a value: its bytes stand in the file as they were written.
        turn.record(Turn.TurnAnswered, at=datetime.now(UTC), text=marker, steps=0)
        log.save(turn)
    finally:
        log.close()
    cut = str(turn.id)
    before = events_by_aggregate(home)
    owner = positions(home)
    data = home.data / "log" / "data.mdb"
    raw = data.read_bytes()
    assert raw.count(marker.encode()) >= 1
    # Written over in place, in every copy the file holds (older pages too): no whole copy is left to find.
    data.write_bytes(raw.replace(marker.encode(), b'"}' + b"\xff" * (len(marker) - 2)))
    found = check(home)
    [damage] = [d for d in found["damage"] if not d["recovered"]]
    assert damage["aggregate"] == cut and damage["version"] == 2 and "cannot be decoded" in damage["reason"]
    assert found["turns"] == [cut]
    report = salvage_and_compare(home, before, {damage["position"]}, owner)
    assert list(report["turns_cut"]) == [cut]
    shown = home.run("turns", "show", cut)
    assert shown.returncode == 0 and "abandoned" in shown.stdout and "damaged: the log was damaged" in shown.stdout, shown.stdout


def test_an_intact_log_checks_clean_and_salvage_refuses_a_folder_in_use(origin: Home, tmp_path: Path) -> None:
    home = copy_of(origin, tmp_path)
    done = home.run("log", "check")
    assert done.returncode == 0 and "every one intact" in done.stdout, done.stdout + done.stderr
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("mine")
    refused = home.run("log", "salvage", str(tmp_path / "taken"))
    assert refused.returncode == 2 and "already exists and is not empty" in refused.stderr
    assert (tmp_path / "taken" / "x").read_text() == "mine"
