"""The byte layout of keys and records in the LMDB log.

Keys sort the way the recorders read them: an aggregate's events by
(originator id, version), notifications by id, both as big-endian integers so
that LMDB's byte order is numeric order. A record starts with a format byte so
that a foreign or damaged value is recognised instead of misread.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache
from itertools import islice
from typing import Any
from uuid import UUID, SafeUUID

from eventsourcing.persistence import Notification, StoredEvent

from metnos.mechanisms.store.errors import CorruptRecord

RECORD_FORMAT = 1
_HEAD = struct.Struct(">BHHq")  # format, len(originator id), len(topic), version
_U64 = struct.Struct(">Q")
_OID_LEN = struct.Struct(">H")
_VERSION_OFFSET = 1 << 63

_UUID_TAG = b"u"
# Bound once: an enum member read through its class costs a descriptor call.
_UNKNOWN_SAFETY = SafeUUID.unknown
_STR_TAG = b"s"


def originator_key(originator_id: UUID | str) -> bytes:
    """Length-prefixed, so that one id is never a prefix of another's keys."""
    raw = _encode_originator_id(originator_id)
    return struct.pack(">H", len(raw)) + raw


def event_key(originator_id: UUID | str, version: int) -> bytes:
    return originator_key(originator_id) + version_bytes(version)


def version_bytes(version: int) -> bytes:
    return _U64.pack(version + _VERSION_OFFSET)


def id_bytes(notification_id: int) -> bytes:
    return _U64.pack(notification_id)


def id_from_bytes(raw: bytes) -> int:
    return _U64.unpack(raw)[0]


@lru_cache(maxsize=4096)
def _encode_originator_id(originator_id: UUID | str) -> bytes:
    if isinstance(originator_id, UUID):
        return _UUID_TAG + originator_id.bytes
    return _STR_TAG + originator_id.encode("utf-8")


# A turn's events share one originator, and scans meet it many times in a row.
@lru_cache(maxsize=4096)
def _decode_originator_id(raw: bytes) -> UUID | str:
    tag, body = raw[:1], raw[1:]
    if tag == _UUID_TAG and len(body) == 16:
        # UUID(bytes=...) validates what we already know: 16 bytes, our own.
        uuid = object.__new__(UUID)
        object.__setattr__(uuid, "int", int.from_bytes(body, "big"))
        object.__setattr__(uuid, "is_safe", _UNKNOWN_SAFETY)
        return uuid
    if tag == _STR_TAG:
        return body.decode("utf-8")
    msg = "originator id has an unknown tag"
    raise ValueError(msg)


def encode_event(event: StoredEvent) -> bytes:
    oid = _encode_originator_id(event.originator_id)
    topic = event.topic.encode("utf-8")
    return _HEAD.pack(RECORD_FORMAT, len(oid), len(topic), event.originator_version) + oid + topic + event.state


def encode_batch(rows: Sequence[tuple[Any, int, str, bytes]], ids: Sequence[int]) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """The index items ``(event key, id key)`` and the records ``(id key, record)`` of a batch of
    ``(originator id, version, topic, state)``, as ``event_key`` and ``encode_event`` make them."""
    return LaidOut.of(rows).items(ids)


class LaidOut:
    """A batch's rows with their event keys and records made, waiting for their ids: what a save
    writes, laid out before the write transaction (a unit of work lays out each save as it comes)."""

    __slots__ = ("event_keys", "records", "rows")

    def __init__(self, rows: list[tuple[Any, int, str, bytes]], event_keys: list[bytes], records: list[bytes]) -> None:
        self.rows, self.event_keys, self.records = rows, event_keys, records

    @classmethod
    def of(cls, rows: Sequence[tuple[Any, int, str, bytes]]) -> LaidOut:
        """The hot loop of a save, where a turn's events share one originator and a few topics."""
        keys: list[bytes] = []
        records: list[bytes] = []
        keys_append = keys.append
        records_append = records.append
        join = b"".join
        # The record's first bytes and the bytes after its header, for the run of one originator and topic in hand.
        last_oid: Any = _NO_ID
        last_topic = ""
        prefix = lengths = tail = b""
        oid_len = topic_len = 0
        for oid, version, topic, state in rows:
            if oid is not last_oid or topic != last_topic:
                raw_oid = _encode_originator_id(oid)
                raw_topic = topic.encode("utf-8")
                prefix = _OID_LEN.pack(len(raw_oid)) + raw_oid
                oid_len, topic_len = len(raw_oid), len(raw_topic)
                lengths = _LENGTHS.pack(RECORD_FORMAT, oid_len, topic_len)
                tail = raw_oid + raw_topic
                last_oid, last_topic = oid, topic
            if 0 <= version < _KNOWN_VERSIONS:
                keys_append(prefix + _VERSION_KEYS[version])
                records_append(join((lengths, _VERSION_FIELDS[version], tail, state)))
            else:
                keys_append(prefix + version_bytes(version))
                records_append(join((_HEAD.pack(RECORD_FORMAT, oid_len, topic_len, version), tail, state)))
        return cls(list(rows), keys, records)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Any:
        return iter(self.rows)

    def __iadd__(self, other: LaidOut) -> LaidOut:
        self.rows += other.rows
        self.event_keys += other.event_keys
        self.records += other.records
        return self

    def items(self, ids: Sequence[int]) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
        """The index items and the records, under ``ids``."""
        id_keys = list(map(_U64.pack, ids))
        if len(id_keys) != len(self.rows):
            raise ValueError(f"{len(self.rows)} rows laid out, {len(id_keys)} ids given")
        return list(zip(self.event_keys, id_keys)), list(zip(id_keys, self.records))


# A version's two encodings, made once for the versions most aggregates have: packing them is
# a third of laying out a record. The key's is offset to sort as unsigned; the record's is as it is.
_LENGTHS = struct.Struct(">BHH")
_KNOWN_VERSIONS = 1024
_VERSION_KEYS = tuple(version_bytes(v) for v in range(_KNOWN_VERSIONS))
_VERSION_FIELDS = tuple(struct.pack(">q", v) for v in range(_KNOWN_VERSIONS))
_NO_ID: Any = object()


def decode_event(table: str, key: bytes, value: bytes) -> StoredEvent:
    oid, version, topic, state = _decode(table, key, value)
    return StoredEvent(originator_id=oid, originator_version=version, topic=topic, state=state)


def decode_notification(table: str, key: bytes, value: bytes) -> Notification:
    oid, version, topic, state = _decode(table, key, value)
    # Scans build hundreds of thousands of these; the frozen dataclass's
    # __init__ (one object.__setattr__ a field) is most of their cost.
    notification = object.__new__(Notification)
    object.__setattr__(
        notification,
        "__dict__",
        {"originator_id": oid, "originator_version": version, "topic": topic, "state": state, "id": _U64.unpack(key)[0]},
    )
    return notification


def decode_parts(table: str, key: bytes, value: bytes) -> tuple[UUID | str, int, str, bytes]:
    """(originator id, version, topic, state) without building an object."""
    return _decode(table, key, value)


def scan_rows(
    table: str, cursor: object, limit: int, wanted: frozenset[str] | None = None, *, ids_as_text: bool = False
) -> tuple[list[tuple[int, UUID | str, int, str, bytes]], int | None]:
    """Up to ``limit`` records from where ``cursor`` stands: the hot loop of scans and catch-ups.

    Returns the rows (only those whose topic is in ``wanted``, when given) and
    the id of the last record read, or None when the cursor ran out. With
    ``ids_as_text``, originator ids are given as text (what folds key on)
    instead of ``UUID`` objects. The header is parsed inline and well-formed
    records skip the checks of ``_decode``; anything odd goes through it to
    get its precise error.
    """
    rows: list[tuple[int, UUID | str, int, str, bytes]] = []
    append = rows.append
    unpack_head = _HEAD.unpack_from
    from_bytes = int.from_bytes
    decode_id = _originator_id_text if ids_as_text else _decode_originator_id
    head = _HEAD.size
    # Raw topic -> topic, or None for a topic nobody asked for.
    topics: dict[bytes, str | None] = {}
    # An aggregate's events sit side by side in a scan (a turn's dozen, one
    # commit), so the id decoded last is nearly always the next one too.
    last_raw_oid = b""
    last_oid: UUID | str = ""
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
        topic = topics.get(raw_topic, _UNSEEN)
        if topic is None:
            continue  # an event nobody reads is never decoded further
        if topic is _UNSEEN:
            # A topic's first record goes through every check of the header.
            topic = _decode(table, key, value)[2]
            if wanted is not None and topic not in wanted:
                topics[raw_topic] = None
                continue
            topics[raw_topic] = topic
        raw_oid = value[head:end_oid]
        if raw_oid != last_raw_oid:
            try:
                last_oid = decode_id(raw_oid)
            except ValueError as e:
                raise CorruptRecord(table, key, str(e)) from None
            last_raw_oid = raw_oid
        append((from_bytes(key, "big"), last_oid, version, topic, value[end_topic:]))
    # A full batch may have more behind it; a short one means the cursor ran out.
    return rows, (from_bytes(key, "big") if read == limit else None)


_UNSEEN: Any = object()


@lru_cache(maxsize=4096)
def _originator_id_text(raw: bytes) -> str:
    """``str(_decode_originator_id(raw))`` straight from the bytes."""
    tag, body = raw[:1], raw[1:]
    if tag == _UUID_TAG and len(body) == 16:
        h = body.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return str(_decode_originator_id(raw))


def peek_topic(table: str, key: bytes, value: bytes) -> str:
    """The topic alone, for filtering notifications without decoding the rest."""
    try:
        fmt, oid_len, topic_len, _ = _HEAD.unpack_from(value)
        start = _HEAD.size + oid_len
        return value[start : start + topic_len].decode("utf-8")
    except (struct.error, UnicodeDecodeError) as e:
        raise CorruptRecord(table, key, f"unreadable header ({e})") from None


def _decode(table: str, key: bytes, value: bytes) -> tuple[UUID | str, int, str, bytes]:
    if value and value[0] != RECORD_FORMAT:
        raise CorruptRecord(table, key, f"unknown record format {value[0]} (this Metnos reads format {RECORD_FORMAT})")
    try:
        fmt, oid_len, topic_len, version = _HEAD.unpack_from(value)
    except struct.error:
        raise CorruptRecord(table, key, f"record of {len(value)} bytes is shorter than a header") from None
    start = _HEAD.size
    end_oid = start + oid_len
    end_topic = end_oid + topic_len
    if end_topic > len(value):
        raise CorruptRecord(table, key, "lengths in the header run past the end of the record")
    try:
        oid = _decode_originator_id(value[start:end_oid])
        topic = value[end_oid:end_topic].decode("utf-8")
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptRecord(table, key, str(e)) from None
    return oid, version, topic, value[end_topic:]
