"""The hot loop of rebuilds: LMDB records straight to the folds that read them.

The layered path (``scan_rows`` -> ``FastMapper.decode_records`` -> the feeds)
builds two tuples an event and runs three loops; over a million events that is
a third of a rebuild. ``feed_records`` does the same in one loop for the
common case (a state stored as plain JSON, see ``metnos.mechanisms.store.mapper.PLAIN_MARK``)
and hands every other record to ``decode_records``, so the two paths cannot
disagree on anything but speed. tests/contract/test_record_feed.py feeds both
from the same logs and compares what they hand over.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import Any

from metnos.mechanisms.store.errors import CorruptRecord
from metnos.mechanisms.store.event_record import Record
from metnos.mechanisms.store.record_batches import RecordCursor
from metnos.mechanisms.store.mapper import PLAIN_MARK, STAMP, TAGGED_MARK, FastMapper, Loaders
from metnos.mechanisms.store.records import _HEAD, RECORD_FORMAT, _decode, _originator_id_text, id_bytes

Feed = Callable[[Record, int], Any]
# What a topic's records go through: its topic, the loader of its plain states, its feeds.
Route = tuple[str, Callable[[bytes], dict[str, Any]] | None, tuple[Feed, ...]]

_UNSEEN: Any = object()


def feed_records(
    recorder: Any,
    mapper: FastMapper,
    feeds: Mapping[str, Sequence[Feed]],
    loaders: Loaders | None = None,
    start: int = 1,
    *,
    batch: int = 5000,
    progress: Callable[[int], Any] | None = None,
) -> int | None:
    """Hand each record of the feeds' topics, from ``start`` on, to its feeds as
    ``feed(record, notification id)``, in log order; returns the last id fed.

    Reads ``batch`` records a transaction, each short, as ``scan_batches``
    does; ``progress(id)`` after each batch that fed something.
    """
    routes: dict[bytes, Route | None] = {}

    def route_for(topic: str) -> Route | None:
        wanted = feeds.get(topic)
        return None if not wanted else (topic, mapper.plain_loader(topic, loaders), tuple(wanted))

    def decode_one(nid: int, originator_id: str, version: int, topic: str, state: bytes) -> Record:
        return mapper.decode_records(((nid, originator_id, version, topic, state),), loaders)[0][2]

    table = recorder.notifications_table
    position = max(start, 1)
    last_fed: int | None = None
    while True:
        with recorder.shared.read() as txn, txn.cursor(db=recorder._notifications_db) as raw:
            cursor = RecordCursor(raw, table)
            if not cursor.set_range(id_bytes(position)):
                return last_fed
            fed, last_read, full = _feed_batch(table, cursor, batch, routes, route_for, decode_one)
        if fed is not None:
            last_fed = fed
            if progress is not None:
                progress(fed)
        if not full:
            return last_fed
        position = last_read + 1


def _feed_batch(
    table: str,
    cursor: Any,
    limit: int,
    routes: dict[bytes, Route | None],
    route_for: Callable[[str], Route | None],
    decode_one: Callable[[int, str, int, str, bytes], Record],
) -> tuple[int | None, int, bool]:
    """Up to ``limit`` records from where ``cursor`` stands; returns (last id fed, last id
    read, whether the batch was full). The header is read as ``scan_rows`` reads it."""
    unpack_head = _HEAD.unpack_from
    from_bytes = int.from_bytes
    head = _HEAD.size
    last_raw_oid = b""
    last_oid = ""
    fed: int | None = None
    read = 0
    key = b""
    for key, value in islice(cursor, limit):
        read += 1
        try:
            fmt, oid_len, topic_len, version = unpack_head(value)
        except struct.error:
            fmt = None
        if fmt != RECORD_FORMAT:
            _decode(table, key, value)  # raises, naming what is wrong
        end_oid = head + oid_len
        end_topic = end_oid + topic_len
        raw_topic = value[end_oid:end_topic]
        route = routes.get(raw_topic, _UNSEEN)
        if route is None:
            continue  # an event nobody reads is never decoded further
        if route is _UNSEEN:
            # A topic's first record goes through every check of the header.
            route = routes[raw_topic] = route_for(_decode(table, key, value)[2])
            if route is None:
                continue
        topic, load, targets = route
        raw_oid = value[head:end_oid]
        if raw_oid != last_raw_oid:
            try:
                last_oid = _originator_id_text(raw_oid)
            except ValueError as e:
                raise CorruptRecord(table, key, str(e)) from None
            last_raw_oid = raw_oid
        nid = from_bytes(key, "big")
        record = None
        if load is not None:
            try:
                if value[end_topic] == PLAIN_MARK and value[end_topic + 1] != TAGGED_MARK:
                    record = load(value[end_topic + 1 :])
                    record["timestamp"] = record.pop(STAMP)
                    record["originator_id"] = last_oid
                    record["originator_version"] = version
            except Exception:  # noqa: BLE001 - the layered path reads it, or says what is wrong
                record = None
        if record is None:
            record = decode_one(nid, last_oid, version, topic, value[end_topic:])
        for feed in targets:
            feed(record, nid)
        fed = nid
    return fed, (from_bytes(key, "big") if read else 0), read == limit
