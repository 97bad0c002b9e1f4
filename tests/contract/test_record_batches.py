"""A commit's records in one value, an aggregate's run of versions in one index entry
(metnos/mechanisms/store/record_batches.py): what the log reads back is what was inserted, whatever
holds it, next to records written one a value by a log of format 1."""

from __future__ import annotations

import shutil
import struct
import tempfile
from pathlib import Path
from uuid import UUID

import lmdb
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from metnos.mechanisms.store import environment as environments
from metnos.mechanisms.store.errors import CorruptRecord
from metnos.mechanisms.store.lmdb import LOG_FORMAT, LMDBApplicationRecorder
from metnos.mechanisms.store.record_batches import BATCH_FORMAT, CHUNK_BYTES, CHUNK_RECORDS, RecordCursor, _split_in_python, batch_count, is_batch, run_length
from metnos.mechanisms.store.records import encode_event, event_key, id_bytes
from metnos.mechanisms.store.survey import EVENTS_TABLE, survey
from tests.contract.scan_loops import skip_unless_compiled

try:
    from metnos.mechanisms.store._scan_loop import split_records as _split_compiled
except ImportError:  # skipped by skip_unless_compiled, failed where CI requires the compiled module
    _split_compiled = None

TOPIC = "tests.contract.test_record_batches:Noted"
AGGREGATES = (UUID(int=1), UUID(int=2), "a text id")


def stored(originator: UUID | str, version: int) -> StoredEvent:
    return StoredEvent(originator_id=originator, originator_version=version, topic=TOPIC, state=b"\x00" + f'{{"v":{version}}}'.encode())


def values(recorder: LMDBApplicationRecorder) -> list[tuple[int, bytes]]:
    with recorder.shared.read() as txn, txn.cursor(db=recorder._notifications_db) as cursor:
        return [(int.from_bytes(key, "big"), bytes(value)) for key, value in cursor]


def index(recorder: LMDBApplicationRecorder) -> list[tuple[bytes, bytes]]:
    with recorder.shared.read() as txn, txn.cursor(db=recorder._index_db) as cursor:
        return [(bytes(key), bytes(value)) for key, value in cursor]


@pytest.fixture
def recorder(tmp_path: Path):
    shared = environments.acquire(tmp_path, sync=False)
    try:
        yield LMDBApplicationRecorder(shared, EVENTS_TABLE)
    finally:
        environments.release(shared)


def test_a_commit_of_many_is_one_value_and_one_index_entry_a_run(recorder) -> None:
    recorder.insert_events([stored(AGGREGATES[0], 1)])
    ids = recorder.insert_events([stored(AGGREGATES[0], v) for v in range(2, 22)] + [stored(AGGREGATES[1], 1), stored(AGGREGATES[1], 2)])
    assert ids == list(range(2, 24))
    held = values(recorder)
    assert [key for key, _ in held] == [1, 23]
    assert not is_batch(held[0][1]) and is_batch(held[1][1])
    assert [run_length(EVENTS_TABLE, key, value) for key, value in index(recorder)] == [1, 20, 2]
    # Read back one by one, by aggregate and in log order, as they were inserted.
    assert [(e.originator_version, e.state) for e in recorder.select_events(AGGREGATES[0])] == [(v, stored(AGGREGATES[0], v).state) for v in range(1, 22)]
    notes = recorder.select_notifications(1, 100)
    assert [(n.id, n.originator_id, n.originator_version) for n in notes] == [
        (1, AGGREGATES[0], 1), *[(v, AGGREGATES[0], v) for v in range(2, 22)], (22, AGGREGATES[1], 1), (23, AGGREGATES[1], 2)]
    assert [n.id for n in recorder.select_notifications(7, 3)] == [7, 8, 9]
    assert recorder.max_notification_id() == 23


@pytest.mark.parametrize("taken", [[5], [20, 21, 22], [1], [21], [3, 4]])
def test_a_version_a_run_holds_is_refused_and_nothing_is_written(recorder, taken: list[int]) -> None:
    recorder.insert_events([stored(AGGREGATES[0], v) for v in range(1, 22)])
    before = values(recorder), index(recorder)
    with pytest.raises(IntegrityError):
        recorder.insert_events([stored(AGGREGATES[1], 1)] + [stored(AGGREGATES[0], v) for v in taken])
    assert (values(recorder), index(recorder)) == before


def test_a_version_twice_in_one_commit_is_refused(recorder) -> None:
    with pytest.raises(IntegrityError, match="twice in one batch"):
        recorder.insert_events([stored(AGGREGATES[0], 1), stored(AGGREGATES[0], 2), stored(AGGREGATES[1], 1), stored(AGGREGATES[0], 2)])
    assert values(recorder) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(range(len(AGGREGATES))), min_size=1, max_size=7), min_size=1, max_size=8),
       st.integers(0, 25), st.integers(0, 25), st.booleans(), st.integers(1, 30))
def test_an_aggregate_reads_back_as_inserted_through_any_runs(commits, gt, lte, desc, limit) -> None:
    """Commits of interleaved aggregates, each next version where it falls; every select the
    eventsourcing contract asks (gt, lte, desc, limit) gives the events a list of them would."""
    folder = Path(tempfile.mkdtemp(prefix="metnos-batches-"))
    shared = environments.acquire(folder, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, EVENTS_TABLE)
        versions = {a: 0 for a in AGGREGATES}
        written: list[tuple[int, UUID | str, int]] = []
        for commit in commits:
            rows = []
            for pick in commit:
                aggregate = AGGREGATES[pick]
                versions[aggregate] += 1
                rows.append(stored(aggregate, versions[aggregate]))
            ids = recorder.insert_events(rows)
            written += [(nid, row.originator_id, row.originator_version) for nid, row in zip(ids, rows)]
        for aggregate in AGGREGATES:
            mine = [v for _, a, v in written if a == aggregate]
            expected = [v for v in mine if v > gt and v <= lte]
            expected = (expected[::-1] if desc else expected)[:limit]
            got = recorder.select_events(aggregate, gt=gt, lte=lte, desc=desc, limit=limit)
            assert [(e.originator_version, e.state) for e in got] == [(v, stored(aggregate, v).state) for v in expected]
            assert [e.originator_version for e in recorder.select_events(aggregate, desc=desc)] == (mine[::-1] if desc else mine)
        start = min(gt + 1, len(written))
        assert [(n.id, n.originator_id, n.originator_version) for n in recorder.select_notifications(start, limit)] == written[start - 1 : start - 1 + limit]
        # And the table walked backwards stands on every notification in turn.
        with recorder.shared.read() as txn, txn.cursor(db=recorder._notifications_db) as raw:
            cursor = RecordCursor(raw, recorder.notifications_table)
            back = []
            moved = cursor.last()
            while moved:
                back.append(int.from_bytes(cursor.key(), "big"))
                moved = cursor.prev()
        assert back == [nid for nid, _, _ in reversed(written)]
    finally:
        environments.release(shared)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_log_of_format_1_reads_as_it_was_and_takes_batches_after(tmp_path: Path) -> None:
    """A log an older Metnos wrote (a record a value, an index entry an event, format 1) is read
    back whole, is written in batches from then on, and says so: an older Metnos then refuses it."""
    env = lmdb.open(str(tmp_path), max_dbs=8, map_size=1 << 24)
    meta, idx, notes = env.open_db(b"metnos.meta"), env.open_db(EVENTS_TABLE.encode()), env.open_db((EVENTS_TABLE + ".notifications").encode())
    with env.begin(write=True) as txn:
        txn.put(b"log_format", b"1", db=meta)
        for nid, version in enumerate(range(1, 4), 1):
            txn.put(event_key(AGGREGATES[0], version), id_bytes(nid), db=idx)
            txn.put(id_bytes(nid), encode_event(stored(AGGREGATES[0], version)), db=notes)
    env.close()
    shared = environments.acquire(tmp_path, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, EVENTS_TABLE)
        assert [e.originator_version for e in recorder.select_events(AGGREGATES[0], gt=1)] == [2, 3]
        with pytest.raises(IntegrityError):
            recorder.insert_events([stored(AGGREGATES[0], 3), stored(AGGREGATES[0], 4)])
        assert recorder.insert_events([stored(AGGREGATES[0], 4), stored(AGGREGATES[0], 5)]) == [4, 5]
        assert [e.originator_version for e in recorder.select_events(AGGREGATES[0], desc=True, limit=3)] == [5, 4, 3]
        assert [n.id for n in recorder.select_notifications(1, 10)] == [1, 2, 3, 4, 5]
        with shared.read() as txn:
            assert txn.get(b"log_format", db=shared.db("metnos.meta")) == str(LOG_FORMAT).encode() == str(BATCH_FORMAT).encode()
    finally:
        environments.release(shared)


def test_a_damaged_batch_is_named_and_its_positions_surveyed(tmp_path: Path) -> None:
    shared = environments.acquire(tmp_path, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, EVENTS_TABLE)
        recorder.insert_events([stored(AGGREGATES[0], 1)])
        recorder.insert_events([stored(AGGREGATES[1], v) for v in range(1, 6)])
        recorder.insert_events([stored(AGGREGATES[0], 2)])
        key, value = values(recorder)[1]
        assert key == 6 and is_batch(value)
        spoiled = value[:5] + bytes(b ^ 0x5A for b in value[5:])
        recorder.shared.write(lambda txn: txn.put(id_bytes(6), spoiled, db=recorder._notifications_db))
        with pytest.raises(CorruptRecord, match="batch cannot be decompressed") as failure:
            recorder.select_notifications(1, 10)
        assert id_bytes(6).hex() in str(failure.value)
        with pytest.raises(CorruptRecord):
            recorder.select_events(AGGREGATES[1])
        assert [e.originator_version for e in recorder.select_events(AGGREGATES[0])] == [1, 2]
    finally:
        environments.release(shared)
    found = survey(tmp_path)
    # Each position the batch held is named with what the index says it was; the batch's copy
    # before the damage, still on a page LMDB had not reused, is found whole there.
    assert [(d.position, d.aggregate, d.version) for d in found.damage] == [(p, str(AGGREGATES[1]), p - 1) for p in range(2, 7)]
    assert all(d.reason.startswith("cannot be read") for d in found.damage)
    assert found.recovered == set(range(2, 7))
    assert [found.intact[p].originator_version for p in range(1, 8)] == [1, 1, 2, 3, 4, 5, 2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=12), st.integers(-2, 3), st.integers(0, 3))
def test_both_splits_of_a_batch_agree_on_whole_and_broken_bodies(records, miscount, cut) -> None:
    """The compiled split and the Python one give the same records, and both refuse (None) a body
    whose lengths do not add up: a count off, a body cut short or run long."""
    skip_unless_compiled()
    body = struct.pack(f">{len(records)}I", *map(len, records)) + b"".join(records)
    count = len(records) + miscount
    for shaped in (body, body[: len(body) - cut], body + b"x" * cut):
        compiled, python = _split_compiled(shaped, count), _split_in_python(shaped, count)
        assert compiled == python
        whole = shaped == body and count == len(records)
        assert (compiled == records) if whole else (compiled is None or (count >= 0 and len(compiled) == count))


def test_a_bulk_save_is_held_in_values_of_a_bounded_size(recorder) -> None:
    """A thousand events in one commit are not one value: a damaged page then loses a chunk, and a value stays small."""
    big = StoredEvent(originator_id=AGGREGATES[1], originator_version=1, topic=TOPIC, state=b"\x00" + b"x" * (CHUNK_BYTES - 10))
    recorder.insert_events([stored(AGGREGATES[0], v) for v in range(1, 1001)] + [big, stored(AGGREGATES[1], 2)])
    held = values(recorder)
    counts = [batch_count("t", id_bytes(key), value) if is_batch(value) else 1 for key, value in held]
    assert sum(counts) == 1002 and max(counts) == CHUNK_RECORDS and [key for key, _ in held][-1] == 1002
    assert counts[-2:] == [1, 1]  # the big record stands alone, and the one after it is not folded in with it
    assert [e.originator_version for e in recorder.select_events(AGGREGATES[0], gt=990)] == list(range(991, 1001))
    assert [n.id for n in recorder.select_notifications(60, 10)] == list(range(60, 70))


def test_an_index_entry_of_no_known_size_is_named_as_corrupt(recorder) -> None:
    recorder.insert_events([stored(AGGREGATES[0], v) for v in range(1, 4)])
    [(key, _)] = index(recorder)
    recorder.shared.write(lambda txn: txn.put(key, b"\x00" * 5, db=recorder._index_db))
    with pytest.raises(CorruptRecord, match="an index entry of 5 bytes is neither an id nor a run") as failure:
        recorder.select_events(AGGREGATES[0])
    assert key.hex() in str(failure.value) and EVENTS_TABLE in str(failure.value)
    with pytest.raises(CorruptRecord, match="neither an id nor a run"):
        recorder.insert_events([stored(AGGREGATES[0], 2)])
