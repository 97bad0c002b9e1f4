"""The hot loop of full scans: LMDB records straight to domain events.

The layered path (``scan_rows`` -> ``FastMapper.decode_rows``) builds a tuple
an event and runs two loops. ``scan_events`` does the same in one loop for the
common case (a state stored as plain JSON, see
``metnos.mechanisms.store.mapper.PLAIN_MARK``, of a class with no upcasting, of
an aggregate with a UUID) and hands every other record to ``decode_rows``, so the two paths cannot
disagree on anything but speed; tests/contract/test_event_scan.py reads both
from the same logs and compares what they give.

A batch is a few hundred records, not thousands: its events are handed on and freed before
the next is made, so the next reuses memory still in the processor's cache (a batch of 5,000
events is megabytes, and the scan ran a quarter slower, a third on a busy machine). A batch's
events are paired with their ids as they are read (``zip``), not in a list of pairs made whole:
that list was a tuple an event kept until the batch was freed.

A run's states are decoded by their class's shape (``_state_decoder``: a msgspec
struct of the class's fields that refuses a key the class does not declare and a field
missing), which parses the stamp into its ``datetime`` as it reads the JSON and hands the
fields over as one dict; a run with a state that does not fit is loaded as JSON as before,
and that class's states from then on (a field stored by an older version of the class comes
back as stored). The event's fields are in the order the layered path gives them.

The loop over a batch's records is compiled where a C compiler was at hand when Metnos was
installed (``_scan_loop.pyx``, built by setup.py): the same loop with no Python line a record,
some half again as fast; without it, ``_events_batch`` below runs, and gives the same events.
``compiled_loop()`` says which one a scan runs.

A batch is decoded with the garbage collector paused: it builds thousands of
dicts that live on, and each collection would walk them all again for cycles
that decoded JSON cannot make. It runs again before the batch is handed on.
"""

from __future__ import annotations

import dataclasses
import gc
import operator
import struct
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from datetime import datetime
from itertools import chain, islice, repeat
from operator import itemgetter
from typing import Any

from uuid import UUID

import msgspec
import orjson
from eventsourcing.domain import AggregateEvent
from eventsourcing.persistence import find_id_convertor, pass_through_convertor

from metnos.mechanisms.store.record_batches import RecordCursor
from metnos.mechanisms.store.mapper import PLAIN_MARK, STAMP, TAGGED_MARK, FastMapper
from metnos.mechanisms.store.records import _HEAD, _UUID_TAG, RECORD_FORMAT, _decode, _decode_originator_id, id_bytes, scan_rows

# Records a read transaction, and events a list handed on (see above).
BATCH = 256

Slow = Callable[[int, Any, int, str, bytes], Any]


def scan_events(
    recorder: Any, mapper: FastMapper, start: int = 1, topics: frozenset[str] | None = None, *, batch: int = BATCH
) -> Iterator[Iterator[tuple[int, Any]]]:
    """Batches of ``(notification id, domain event)`` from ``start`` on, in log order, each
    to be iterated once.

    With ``topics``, other events are skipped before they are decoded. Reads
    ``batch`` records a transaction, each short, as ``scan_batches`` does; a
    batch none of whose records matched is not given.
    """
    table = recorder.notifications_table
    # (raw topic, the state's compression mark and first byte) -> the class its plain states
    # decode to (None: the layered path decodes them), or _SKIP for a topic nobody asked for.
    kinds: dict[bytes, Any] = {}
    # A header's format and lengths -> where its id, its kind and what a segment shares are (``_shape``).
    shapes: dict[bytes, Any] = {}

    def kind_of(key: bytes, value: bytes, end: int) -> Any:
        topic = _decode(table, key, value)[2]
        if topics is not None and topic not in topics:
            return _SKIP
        cls, class_version, _ = mapper._class_of(topic)
        plain = value[end] == PLAIN_MARK and value[end + 1] != TAGGED_MARK
        fast = plain and class_version == 1 and find_id_convertor(cls, UUID) is pass_through_convertor and _dict_slot(cls) is _EVENT_DICT
        # A record this loop decodes has a UUID for its id (a tag and 16 bytes): its state starts where its topic and mark end.
        state_at = _HEAD.size + _UUID_OID_LEN + _HEAD.unpack_from(value)[2] + 1
        return (cls if fast else None), topic, slice(state_at, None), (_state_decoder(cls) if fast else None)

    def slow(nid: int, originator_id: Any, version: int, topic: str, state: bytes) -> Any:
        return mapper.decode_rows(((nid, originator_id, version, topic, state),))[0]

    position = max(start, 1)
    while True:
        collecting = gc.isenabled()
        gc.disable()
        try:
            with recorder.shared.read() as txn, txn.cursor(db=recorder._notifications_db) as raw:
                cursor = RecordCursor(raw, table)
                if not cursor.set_range(id_bytes(position)):
                    return
                first = int.from_bytes(cursor.key(), "big")
                ids, events, read = _batch_loop(cursor, first, batch, kinds, kind_of, slow, shapes)
                # A short batch ran the cursor off the end, where it has no key: its last record is the table's last.
                last = int.from_bytes(cursor.key(), "big") if read == batch or (read and cursor.last()) else first
                if events is None or last - first + 1 != read:
                    # A gap between ids, or a record the layered path must read with its key: this batch its way.
                    cursor.set_range(id_bytes(position))
                    rows, after = scan_rows(table, cursor, batch, topics)
                    ids, events = [row[0] for row in rows], mapper.decode_rows(rows)
                    read, last = (batch, after) if after is not None else (0, 0)
        finally:
            if collecting:
                gc.enable()
        if events:
            # Paired as they are read: a list of pairs made whole would be a tuple an event, kept.
            yield zip(ids, events)
        if read < batch:
            return
        position = last + 1


def _events_batch(
    cursor: Any, first: int, limit: int, kinds: dict[bytes, Any], kind_of: Callable[[bytes, bytes, int], Any], slow: Slow,
    shapes: dict[bytes, Any],
) -> tuple[Any, list[Any] | None, int]:
    """Up to ``limit`` records from where ``cursor`` stands, the first of them numbered ``first``
    and the others taken to follow it without a gap (the caller checks); returns (their ids, the
    events, how many records were read), or no events for a record this loop does not read (a bad
    header, an id that is not a UUID). The header is read as ``scan_rows`` reads it.

    Runs of plain states are decoded a run at a time (``_decode_run``), the others one by one
    through the layered path, in their place. A record whose header lengths, originator id, topic
    and kind of state are those of the record before it (a turn's steps, one after another) is
    recognised by comparing bytes in place and only kept: such a segment's records are given
    their kind and originator id together where it ends.
    """
    events: list[Any] = []
    spans: list[range] = []  # the events' ids, as ranges of consecutive ids
    run_first = first
    values: list[bytes] = []
    run_kinds: list[Any] = []
    run_ids: list[Any] = []
    # Whether a record of the run has a class with no shape (``_state_decoder``): its states are then loaded as JSON.
    loose = False
    # The segment in hand: its kind, its originator id and where it starts in ``values``.
    kind: Any = None
    originator_id: Any = None
    segment = 0
    plain = False  # whether the segment is of a kind this loop decodes itself
    lengths = same = b"\xff"  # its header's format and lengths, and what follows its version
    last_raw_oid: bytes | None = None  # no record's id, not even an empty one, equals it
    end = 0
    # The slices compared, made once (a slice written in the loop is built for every record).
    at_lengths, at_same = _LENGTHS, slice(0, 0)
    for value in islice(cursor.iternext(keys=False, values=True), limit):
        if not (value[at_lengths] == lengths and value[at_same] == same):
            if plain:
                run_kinds += [kind] * (len(values) - segment)
                run_ids += [originator_id] * (len(values) - segment)
            lengths = value[at_lengths]
            started = _segment_start(value, cursor, kinds, kind_of, shapes, last_raw_oid, originator_id)
            if started is None:
                return None, None, 0
            (at_oid, at_kind, at_same, end), kind, last_raw_oid, originator_id = started
            same = value[at_same]
            plain = kind is not _SKIP and kind[0] is not None
            loose = loose or (plain and kind[3] is None)
            segment = len(values)
        if plain:
            values.append(value)
            continue
        # Not one of a run: numbered after the run before it, which is decoded first.
        nid = run_first + len(values)
        if values:
            _decode_run(values, run_first, run_kinds, run_ids, loose, events, spans, slow, kinds)
            values, run_kinds, run_ids, loose = [], [], [], False
        run_first, segment = nid + 1, 0
        if kind is not _SKIP:
            events.append(slow(nid, originator_id, _unpack_version(value)[0], kind[1], value[end:]))
            _add_span(spans, nid, nid + 1)
    if values:
        if plain:
            run_kinds += [kind] * (len(values) - segment)
            run_ids += [originator_id] * (len(values) - segment)
        _decode_run(values, run_first, run_kinds, run_ids, loose, events, spans, slow, kinds)
    ids = spans[0] if len(spans) == 1 else chain.from_iterable(spans)
    return ids, events, run_first + len(values) - first


def _segment_start(
    value: bytes, cursor: Any, kinds: dict[bytes, Any], kind_of: Callable[[bytes, bytes, int], Any], shapes: dict[bytes, Any],
    last_raw_oid: bytes | None, originator_id: Any,
) -> tuple[tuple[slice, slice, slice, int], Any, bytes, Any] | None:
    """What the first record of a segment is, for both loops over records (this module's and the
    compiled one): its shape (``_shape``), its kind, its originator id raw and decoded (decoded
    again only when it differs from the record's before); None for a record neither loop reads (a
    bad header, an id that is not a UUID). Once a segment, not once a record."""
    lengths = value[_LENGTHS]
    shape = shapes.get(lengths)
    if shape is None:
        shape = _shape(lengths)
        if shape is None:
            return None
        shapes[lengths] = shape
    at_oid, at_kind, _, end = shape
    if len(value) < end + 2:
        return None
    kind_key = value[at_kind]
    kind = kinds.get(kind_key)
    if kind is None:
        kind = kinds[kind_key] = kind_of(cursor.key(), value, end)
    raw_oid = value[at_oid]
    if raw_oid != last_raw_oid:
        if raw_oid[:1] != _UUID_TAG:
            return None
        try:
            originator_id = _decode_originator_id(raw_oid)
        except ValueError:
            return None
    return shape, kind, raw_oid, originator_id


def _shape(lengths: bytes) -> tuple[slice, slice, slice, int] | None:
    """Where a record with this format and these lengths has its originator id, its kind (topic,
    compression mark and first byte of state) and what the records of one segment share (id to
    that byte), and where its topic ends; None for another format than this loop reads."""
    if len(lengths) < 5 or lengths[0] != RECORD_FORMAT:
        return None
    _, oid_len, topic_len = _LENGTHS_OF(lengths)
    end_oid = _HEAD.size + oid_len
    end = end_oid + topic_len
    return slice(_HEAD.size, end_oid), slice(end_oid, end + 2), slice(_HEAD.size, end + 2), end


def _add_span(spans: list[range], start: int, stop: int) -> None:
    """Ids ``start`` to ``stop`` (excluded) after those in ``spans``, joined to the last range when they follow it."""
    if spans and spans[-1].stop == start:
        spans[-1] = range(spans[-1].start, stop)
    else:
        spans.append(range(start, stop))


def _decode_run(
    values: list[bytes], first: int, run_kinds: list[Any], run_ids: list[Any], loose: bool,
    events: list[Any], spans: list[range], slow: Slow, kinds: dict[bytes, Any],
) -> None:
    """The events of a run of plain records numbered from ``first``, with their kinds (class, topic,
    where the state starts, the class's shape or None) and originator ids, appended to ``events``
    and their ids to ``spans``: every step a ``map`` over the run, so that no Python line runs once
    an event, and what is needed once (a state's bytes, its version) made as it is used."""
    states = None
    if not loose:
        try:
            states = list(map(_asdict, map(_decode_state, map(_DECODER, run_kinds), map(_getitem, values, map(_CUT, run_kinds)))))
        except Exception:  # noqa: BLE001 - a state its class's shape does not fit: read as below
            _drop_misfits(kinds, run_kinds, list(map(_getitem, values, map(_CUT, run_kinds))))
    if states is None:
        raw_states = list(map(_getitem, values, map(_CUT, run_kinds)))
        try:
            states = list(map(_loads, raw_states))
            stamps = list(map(_fromiso, map(dict.pop, states, repeat(STAMP))))
        except Exception:  # noqa: BLE001 - one at a time, the layered path decodes them or says what is wrong
            versions = map(_FIRST, map(_unpack_version, values))
            for nid, version, state, kind, originator_id in zip(range(first, first + len(values)), versions, raw_states, run_kinds, run_ids):
                events.append(slow(nid, originator_id, version, kind[1], bytes([PLAIN_MARK]) + state))
            _add_span(spans, first, first + len(values))
            return
        _consume(map(_setitem, states, repeat("timestamp"), stamps))
    _consume(map(_setitem, states, repeat("originator_id"), run_ids))
    _consume(map(_setitem, states, repeat("originator_version"), map(_FIRST, map(_unpack_version, values))))
    made = list(map(_new, map(_CLASS, run_kinds)))
    _consume(map(_set_dict, made, states))
    events += made
    _add_span(spans, first, first + len(values))


_loads = orjson.loads
_fromiso = datetime.fromisoformat
_new = object.__new__
# Both C functions called without a bound method or a slot wrapper made each time, unlike
# dict.__setitem__ and object.__setattr__: a third less for the run's keys and objects.
_setitem = operator.setitem


def _dict_slot(cls: type) -> Any:
    """The ``__dict__`` descriptor an instance of ``cls`` is given its dict through (what ``object.__setattr__`` would find)."""
    return next((vars(klass)["__dict__"] for klass in cls.__mro__ if "__dict__" in vars(klass)), None)


# An aggregate's events take their dict through this one descriptor; a class that does not
# (slots of its own, another base) is read by the layered path.
_EVENT_DICT = _dict_slot(AggregateEvent)
_set_dict = _EVENT_DICT.__set__
_SKIP: Any = object()
_UUID_OID_LEN = 17
# A record's format and the lengths of its originator id and topic.
_LENGTHS = slice(0, 5)
_LENGTHS_OF = struct.Struct(">BHH").unpack
_CLASS = itemgetter(0)
_CUT = itemgetter(2)
_DECODER = itemgetter(3)
_decode_state = msgspec.json.Decoder.decode
_asdict = msgspec.structs.asdict
# The fields an event class's stored state has besides those the scan sets itself.
_OWN = frozenset(("originator_id", "originator_version", "timestamp"))
_DECODERS: weakref.WeakKeyDictionary[type, Any] = weakref.WeakKeyDictionary()
_FIRST = itemgetter(0)
_getitem = operator.getitem
# A record's version, after its format and lengths.
_unpack_version = struct.Struct(">5xq").unpack_from


def _drop_misfits(kinds: dict[bytes, Any], run_kinds: list[Any], states: list[bytes]) -> None:
    """After a run's decoding by shape failed: the kinds with a state that does not fit their
    shape (a field stored that the class no longer declares) lose it in ``kinds``, and their
    states are loaded as JSON from then on."""
    misfits = set()
    for kind, state in zip(run_kinds, states, strict=True):
        decoder = kind[3]
        if decoder is None or id(kind) in misfits:
            continue
        try:
            decoder.decode(state)
        except Exception:  # noqa: BLE001 - any failure: not this shape's
            misfits.add(id(kind))
    for key, kind in list(kinds.items()):
        if kind is not _SKIP and id(kind) in misfits:
            kinds[key] = (*kind[:3], None)


def _state_decoder(cls: type) -> Any:
    """A decoder of ``cls``'s plain stored states straight to its fields with the stamp as a
    ``datetime`` under ``timestamp``, which fails on a key the class does not declare or a field
    missing; None when the class's fields cannot be told (the states are then loaded as JSON)."""
    try:
        return _DECODERS[cls]
    except KeyError:
        pass
    decoder = None
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if f.name not in _OWN]
        try:
            shape = msgspec.defstruct(
                f"{cls.__name__}State",
                [(name, Any) for name in names] + [("timestamp", datetime)],
                rename={"timestamp": STAMP},
                forbid_unknown_fields=True,
                gc=False,
            )
            decoder = msgspec.json.Decoder(shape)
        except (TypeError, ValueError):
            decoder = None
    _DECODERS[cls] = decoder
    return decoder


# Runs an iterator of calls to its end, keeping nothing (one deque for every scan: it stays empty).
_consume = deque(maxlen=0).extend



# What the compiled loop shares with the Python one (``_scan_loop.events_batch``'s ``helpers``).
_HELPERS = (_segment_start, _decode_run, _SKIP, _asdict, _add_span)

try:
    from metnos.mechanisms.store._scan_loop import events_batch as _compiled_batch
except ImportError:  # installed without a C compiler: the Python loop, the same events
    _compiled_batch = None


def _compiled_events_batch(
    cursor: Any, first: int, limit: int, kinds: dict[bytes, Any], kind_of: Callable[[bytes, bytes, int], Any], slow: Slow,
    shapes: dict[bytes, Any],
) -> tuple[Any, list[Any] | None, int]:
    return _compiled_batch(cursor, first, limit, kinds, kind_of, slow, shapes, _HELPERS)


def compiled_loop() -> bool:
    """Whether a scan runs the compiled loop over records (``_scan_loop``) rather than ``_events_batch``."""
    return _batch_loop is _compiled_events_batch


_batch_loop = _events_batch if _compiled_batch is None else _compiled_events_batch
