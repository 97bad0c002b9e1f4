"""The rebuild's one-loop feed hands over exactly what the layered path gives.

``LMDBApplicationRecorder.feed_records`` (metnos/mechanisms/store/record_feed.py) reads
plain states itself and passes everything else to the mapper; these logs hold
one of each kind it must tell apart.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.base import Created, DomainEvent, MetnosAggregate
from metnos.mechanisms.store import environment as environments
from metnos.mechanisms.store.compressor import ZstdCompressor
from metnos.mechanisms.store.errors import CorruptRecord
from metnos.mechanisms.store.lmdb import LMDBApplicationRecorder
from metnos.mechanisms.store.mapper import FastMapper
from metnos.mechanisms.store.records import encode_event, id_bytes
from metnos.mechanisms.store.transcoder import OrjsonTranscoder

AT = datetime(2026, 11, 22, 8, 0, 0, 250000, tzinfo=timezone(timedelta(hours=1)))


class Ledger(MetnosAggregate):
    class Opened(Created):
        owner: str

    class Noted(DomainEvent):
        text: str
        extra: Any

    class Ignored(DomainEvent):
        n: int

    class Renamed(DomainEvent):
        # Stored before a field was added: read through its upcast.
        class_version = 2
        name: str
        reason: str

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["reason"] = "unknown"

    def __init__(self, owner: str) -> None:
        self.owner = owner


OPENED, NOTED, IGNORED, RENAMED = (get_topic(c) for c in (Ledger.Opened, Ledger.Noted, Ledger.Ignored, Ledger.Renamed))


@pytest.fixture
def recorder() -> Iterator[LMDBApplicationRecorder]:
    folder = Path(tempfile.mkdtemp(prefix="metnos-feed-"))
    shared = environments.acquire(folder, sync=False)
    try:
        yield LMDBApplicationRecorder(shared, "events")
    finally:
        environments.release(shared)
        shutil.rmtree(folder, ignore_errors=True)


def fast() -> FastMapper:
    return FastMapper(transcoder=OrjsonTranscoder(), compressor=ZstdCompressor())


def write_log(recorder: LMDBApplicationRecorder, extras: list[Any], per_insert: int | None = None) -> None:
    """Every kind of stored state the feed must tell apart, over two aggregates; in one insert
    (a batch, as a turn commits), or ``per_insert`` events an insert (1: a record a value, as the
    tests that spoil a record want it)."""
    ours, stock = fast(), Mapper(transcoder=OrjsonTranscoder(), compressor=ZstdCompressor())
    ledger = Ledger._create(Ledger.Opened, id=UUID(int=1), owner="ann", timestamp=AT)
    for extra in extras:
        ledger.trigger_event(Ledger.Noted, text="plain", extra=extra, timestamp=AT)
        ledger.trigger_event(Ledger.Ignored, n=1, timestamp=AT)
    ledger.trigger_event(Ledger.Noted, text="big " * 400, extra=None, timestamp=AT)  # compressed
    ledger.trigger_event(Ledger.Noted, text="tagged", extra=UUID(int=9), timestamp=AT)  # tagged values
    events = ledger.collect_events()
    stored = [ours.to_stored_event(e) for e in events]
    # An event written by the stock mapper: its timestamp is a tagged value, not a stamp.
    other = Ledger._create(Ledger.Opened, id=UUID(int=2), owner="bob", timestamp=AT)
    other.trigger_event(Ledger.Noted, text="stock", extra=[1, 2], timestamp=AT)
    stored += [stock.to_stored_event(e) for e in other.collect_events()]
    # A version-1 state of a class now at version 2.
    v1 = b"\x00" + orjson.dumps({"name": "old", "__ts__": AT.isoformat()})
    stored.append(StoredEvent(originator_id=UUID(int=2), originator_version=3, topic=RENAMED, state=v1))
    step = per_insert or len(stored)
    for at in range(0, len(stored), step):
        recorder.insert_events(stored[at : at + step])


def layered(recorder: LMDBApplicationRecorder, mapper: FastMapper, fields: dict[str, Any], start: int = 1) -> list[tuple[int, str, dict]]:
    loaders = mapper.record_loaders(fields)
    return [r for rows in recorder.scan_batches(start, topics=frozenset(fields), ids_as_text=True) for r in mapper.decode_records(rows, loaders)]


def fed(recorder: LMDBApplicationRecorder, mapper: FastMapper, fields: dict[str, Any], start: int = 1, batch: int = 5000) -> tuple[list, int | None]:
    from metnos.mechanisms.store.record_feed import feed_records

    got: list[tuple[int, str, dict]] = []
    feeds = {topic: [lambda record, nid, topic=topic: got.append((nid, topic, record))] for topic in fields}
    last = feed_records(recorder, mapper, feeds, mapper.record_loaders(fields), start, batch=batch)
    return got, last


FIELDS = [
    {OPENED: None, NOTED: None, RENAMED: None},
    {OPENED: frozenset({"owner"}), NOTED: frozenset({"text"}), RENAMED: frozenset({"name", "reason"})},
    {NOTED: frozenset()},
]
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)


@settings(max_examples=30, deadline=None)
@given(st.lists(json_values, max_size=6), st.sampled_from(FIELDS), st.integers(1, 4), st.integers(1, 12), st.sampled_from([None, 1, 3]))
def test_the_feed_hands_over_what_the_layered_path_gives(extras, fields, batch, start, per_insert) -> None:
    folder = Path(tempfile.mkdtemp(prefix="metnos-feed-"))
    shared = environments.acquire(folder, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, "events")
        write_log(recorder, extras, per_insert)
        expected = layered(recorder, fast(), fields, start)
        got, last = fed(recorder, fast(), fields, start, batch)
        assert got == expected
        assert last == (expected[-1][0] if expected else None)
    finally:
        environments.release(shared)
        shutil.rmtree(folder, ignore_errors=True)


def test_every_kind_of_state_reaches_its_feed(recorder) -> None:
    write_log(recorder, [{"a": 1}])
    got, _ = fed(recorder, fast(), FIELDS[1])
    by_text = {r.get("text"): r for _, topic, r in got if topic == NOTED}
    assert by_text["plain"] == {"text": "plain", "timestamp": AT.isoformat(), "originator_id": str(UUID(int=1)), "originator_version": 2}
    assert by_text["big " * 400]["text"].startswith("big")
    assert by_text["tagged"]["extra"] == UUID(int=9)  # read whole, unwrapped
    assert by_text["stock"]["timestamp"] == AT.isoformat()
    renamed = [r for _, topic, r in got if topic == RENAMED]
    assert [(r["name"], r["reason"]) for r in renamed] == [("old", "unknown")]
    assert all(topic != IGNORED for _, topic, _ in got)


def test_a_corrupt_record_stops_the_feed_with_its_key(recorder) -> None:
    write_log(recorder, [], per_insert=1)

    def spoil(txn: Any) -> None:
        txn.put(id_bytes(2), b"\x07garbage", db=recorder._notifications_db)

    recorder.shared.write(spoil)
    with pytest.raises(CorruptRecord, match="unknown record format 7"):
        fed(recorder, fast(), FIELDS[0])


def test_a_state_that_is_not_json_is_the_mapper_error_naming_the_event(recorder) -> None:
    bad = StoredEvent(originator_id=UUID(int=5), originator_version=1, topic=OPENED, state=b"\x00{not json")
    recorder.insert_events([bad])
    with pytest.raises(MapperDeserialisationError, match=str(UUID(int=5))):
        fed(recorder, fast(), FIELDS[1])
    assert encode_event(bad)  # the record itself is well-formed: only its state is not


def test_no_topic_wanted_reads_nothing_and_every_path_agrees(tmp_path, monkeypatch) -> None:
    from metnos.mechanisms.eventlog import EventLog
    from metnos.settings.workspace import Workspace

    log = EventLog(Workspace(data_dir=tmp_path / "data", config_dir=tmp_path / "config"), env={"LMDB_SYNC": "no"})
    try:
        ledger = Ledger._create(Ledger.Opened, id=UUID(int=1), owner="ann", timestamp=AT)
        ledger.trigger_event(Ledger.Noted, text="t", extra=None, timestamp=AT)
        log.save(ledger)
        assert list(log.record_batches(fields={})) == []
        got: list[Any] = []
        assert log.feed({}, fields={}) is None
        assert log.feed({NOTED: [lambda r, n: got.append((n, r["text"]))]}, fields={NOTED: frozenset({"text"})}) == 2
        assert got == [(2, "t")]
        # Without the one-loop feed (another recorder), the same through record_batches.
        monkeypatch.setattr(type(log.recorder), "feed_records", None, raising=False)
        again: list[Any] = []
        assert log.feed({NOTED: [lambda r, n: again.append((n, r["text"]))]}, fields={NOTED: frozenset({"text"})}) == 2
        assert again == got
    finally:
        log.close()
