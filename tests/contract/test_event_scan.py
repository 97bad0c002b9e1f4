"""The full scan's one loop gives exactly the domain events the layered path gives, and the
save's one-``dumps`` encoding writes exactly the bytes the transcoder-then-stamp path wrote.

``scan_events`` (metnos/mechanisms/store/event_scan.py) decodes runs of plain
states itself and hands everything else to ``FastMapper.decode_rows``; the logs
here hold every kind of state it must tell apart (tests/contract/test_record_feed.py
writes them), a gap between ids and an aggregate with a text id.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest
from eventsourcing.persistence import StoredEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from metnos.mechanisms.store import environment as environments
from metnos.mechanisms.store.errors import CorruptRecord
from metnos.mechanisms.store import event_scan
from metnos.mechanisms.store.event_scan import scan_events
from metnos.mechanisms.store.lmdb import LMDBApplicationRecorder
from metnos.mechanisms.store.mapper import _with_stamp
from metnos.mechanisms.store.records import _HEAD, id_bytes
from tests.contract.test_record_feed import AT, IGNORED, NOTED, OPENED, RENAMED, Ledger, fast, json_values, write_log
from tests.contract.scan_loops import each_scan_loop  # noqa: F401 - every test here runs with both loops

TOPICS = [None, frozenset({OPENED, NOTED, RENAMED}), frozenset({NOTED}), frozenset({IGNORED}), frozenset()]


def layered(recorder: LMDBApplicationRecorder, topics: frozenset[str] | None, start: int) -> list[tuple[int, type, dict]]:
    mapper = fast()
    return [(row[0], type(e), e.__dict__) for rows in recorder.scan_batches(start, topics=topics) for row, e in zip(rows, mapper.decode_rows(rows), strict=True)]


def scanned(recorder: LMDBApplicationRecorder, topics: frozenset[str] | None, start: int, batch: int) -> list[tuple[int, type, dict]]:
    return [(nid, type(e), e.__dict__) for events in scan_events(recorder, fast(), start, topics, batch=batch) for nid, e in events]


def with_a_gap_and_a_text_id(recorder: LMDBApplicationRecorder) -> None:
    """Record 3 gone (as a salvage may leave a log), and events of an aggregate whose id is text."""
    recorder.shared.write(lambda txn: txn.delete(id_bytes(3), db=recorder._notifications_db))
    mapper = fast()
    named = Ledger._create(Ledger.Opened, id=UUID(int=7), owner="cy", timestamp=AT)
    named.trigger_event(Ledger.Noted, text="named", extra={"k": [1]}, timestamp=AT)
    stored = [mapper.to_stored_event(e) for e in named.collect_events()]
    recorder.insert_events([StoredEvent(originator_id=str(UUID(int=7)), originator_version=s.originator_version, topic=s.topic, state=s.state) for s in stored])


@settings(max_examples=40, deadline=None)
@given(st.lists(json_values, max_size=6), st.sampled_from(TOPICS), st.integers(1, 5), st.integers(1, 14), st.booleans(), st.sampled_from([None, 1, 3]))
def test_the_scan_gives_what_the_layered_path_gives(extras, topics, batch, start, gap, per_insert) -> None:
    folder = Path(tempfile.mkdtemp(prefix="metnos-scan-"))
    shared = environments.acquire(folder, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, "events")
        # A gap is a record deleted from the table, which a record a value allows.
        write_log(recorder, extras, 1 if gap else per_insert)
        if gap:
            with_a_gap_and_a_text_id(recorder)
        expected = layered(recorder, topics, start)
        assert scanned(recorder, topics, start, batch) == expected
    finally:
        environments.release(shared)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_long_run_of_plain_states_is_read_whole_and_in_order(tmp_path: Path) -> None:
    shared = environments.acquire(tmp_path, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, "events")
        write_log(recorder, [{"n": n} for n in range(300)])
        got = scanned(recorder, None, 1, 128)
        assert got == layered(recorder, None, 1)
        assert [nid for nid, _, _ in got] == list(range(1, len(got) + 1))
        noted = [state for _, cls, state in got if cls is Ledger.Noted and state["text"] == "plain"]
        assert [state["extra"] for state in noted] == [{"n": n} for n in range(300)]
        assert all(type(state["timestamp"]) is datetime and state["originator_id"] == UUID(int=1) for state in noted)
    finally:
        environments.release(shared)


def test_a_short_last_batch_is_read_by_the_one_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch that runs off the end of the log (its cursor left without a key) is not taken
    for one with a gap: the layered path's reader is never asked."""
    shared = environments.acquire(tmp_path, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, "events")
        write_log(recorder, [{"n": n} for n in range(10)])
        expected = layered(recorder, None, 1)
        assert len(expected) % 7 != 0
        monkeypatch.setattr(event_scan, "scan_rows", lambda *args, **kwargs: pytest.fail("the layered path read a batch"))
        assert scanned(recorder, None, 1, 7) == expected
    finally:
        environments.release(shared)


def test_a_corrupt_record_stops_the_scan_with_its_key(tmp_path: Path) -> None:
    shared = environments.acquire(tmp_path, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, "events")
        write_log(recorder, [], per_insert=1)
        recorder.shared.write(lambda txn: txn.put(id_bytes(2), b"\x07garbage", db=recorder._notifications_db))
        with pytest.raises(CorruptRecord, match="unknown record format 7"):
            scanned(recorder, None, 1, 5000)
    finally:
        environments.release(shared)


# JSON has no infinity: orjson writes it as null, on either path.
finite = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
states = st.dictionaries(st.text(max_size=6), st.one_of(finite, st.uuids(), st.tuples(st.integers(), st.text(max_size=3)), st.integers(2**64, 2**70)),
                         max_size=4)


@settings(max_examples=80, deadline=None)
@given(states, st.datetimes(timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=-5))])))
def test_a_saved_state_is_the_bytes_the_transcoder_and_the_stamp_made(state: dict[str, Any], at: datetime) -> None:
    mapper = fast()
    event = Ledger.Noted(originator_id=UUID(int=3), originator_version=2, timestamp=at, text="t", extra=state)
    stored = mapper.to_stored_event(event)
    # The path every log was written by until the one-``dumps`` encoding: encode, then splice the stamp in.
    before = {k: v for k, v in event.__dict__.items() if k not in ("originator_id", "originator_version", "timestamp")}
    expected = mapper.compressor.compress(_with_stamp(mapper.transcoder.encode(before), orjson.dumps(at)))
    assert stored.state == expected
    assert mapper.to_domain_event(stored).__dict__ == event.__dict__


def test_a_record_with_an_empty_id_first_in_a_batch_stops_the_scan(tmp_path: Path) -> None:
    """The loop remembers the id of the record before; before a batch's first record there is
    none, and an empty id must not pass for it (its topic already known from an earlier batch,
    so that nothing else reads its header whole)."""
    shared = environments.acquire(tmp_path, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, "events")
        write_log(recorder, [{"n": 1}, {"n": 2}], per_insert=1)
        with recorder.shared.read() as txn, txn.cursor(db=recorder._notifications_db) as cursor:
            records = [(int.from_bytes(key, "big"), bytes(value)) for key, value in cursor]
        topics = [value[_HEAD.size + _HEAD.unpack_from(value)[1] :][: _HEAD.unpack_from(value)[2]] for _, value in records]
        nid, value = next(records[k] for k in range(1, len(records)) if topics[k] in topics[:k])
        fmt, oid_len, topic_len, version = _HEAD.unpack_from(value)
        emptied = _HEAD.pack(fmt, 0, topic_len, version) + value[_HEAD.size + oid_len :]
        recorder.shared.write(lambda txn: txn.put(id_bytes(nid), emptied, db=recorder._notifications_db))
        with pytest.raises(CorruptRecord, match="unknown tag"):
            scanned(recorder, None, 1, nid - 1)
    finally:
        environments.release(shared)


def test_a_state_that_does_not_fit_its_class_s_fields_reads_as_stored(tmp_path: Path) -> None:
    """A plain state with a field its class no longer declares, or without one it now declares, comes
    back from the one loop as the layered path reads it (the stored keys, no more, no fewer); its
    class's states are loaded as JSON from then on, the other classes' still by their shape."""
    shared = environments.acquire(tmp_path, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, "events")
        write_log(recorder, [{"n": n} for n in range(3)])
        odd = [{"text": "old", "extra": 1, "gone": [1, 2]}, {"text": "older"}]
        stored = [StoredEvent(originator_id=UUID(int=3), originator_version=n, topic=NOTED,
                              state=b"\x00" + orjson.dumps({**state, "__ts__": AT.isoformat()})) for n, state in enumerate(odd, 1)]
        later = Ledger._create(Ledger.Opened, id=UUID(int=4), owner="dee", timestamp=AT)
        for n in range(3):
            later.trigger_event(Ledger.Noted, text="fits", extra=n, timestamp=AT)
        recorder.insert_events(stored + [fast().to_stored_event(e) for e in later.collect_events()])
        expected = layered(recorder, None, 1)
        for batch in (1, 7, 5000):  # each record a run of its own, then with others
            got = scanned(recorder, None, 1, batch)
            assert got == expected, batch
            read = [state for _, cls, state in got if cls is Ledger.Noted and state["text"] in ("old", "older")]
            assert read[0]["gone"] == [1, 2] and "extra" not in read[1], batch
            assert list(read[0]) == ["text", "extra", "gone", "timestamp", "originator_id", "originator_version"], batch
    finally:
        environments.release(shared)
