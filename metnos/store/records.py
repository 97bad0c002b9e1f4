"""The byte layout of keys and records in the LMDB log.

Keys sort the way the recorders read them: an aggregate's events by
(originator id, version), notifications by id, both as big-endian integers so
that LMDB's byte order is numeric order. A record starts with a format byte so
that a foreign or damaged value is recognised instead of misread.
"""

from __future__ import annotations

import struct
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent

from metnos.store.errors import CorruptRecord

RECORD_FORMAT = 1
_HEAD = struct.Struct(">BHHq")  # format, len(originator id), len(topic), version
_U64 = struct.Struct(">Q")
_VERSION_OFFSET = 1 << 63

_UUID_TAG = b"u"
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


def _encode_originator_id(originator_id: UUID | str) -> bytes:
    if isinstance(originator_id, UUID):
        return _UUID_TAG + originator_id.bytes
    return _STR_TAG + originator_id.encode("utf-8")


def _decode_originator_id(raw: bytes) -> UUID | str:
    tag, body = raw[:1], raw[1:]
    if tag == _UUID_TAG and len(body) == 16:
        return UUID(bytes=body)
    if tag == _STR_TAG:
        return body.decode("utf-8")
    msg = "originator id has an unknown tag"
    raise ValueError(msg)


def encode_event(event: StoredEvent) -> bytes:
    oid = _encode_originator_id(event.originator_id)
    topic = event.topic.encode("utf-8")
    return _HEAD.pack(RECORD_FORMAT, len(oid), len(topic), event.originator_version) + oid + topic + event.state


def decode_event(table: str, key: bytes, value: bytes) -> StoredEvent:
    oid, version, topic, state = _decode(table, key, value)
    return StoredEvent(originator_id=oid, originator_version=version, topic=topic, state=state)


def decode_notification(table: str, key: bytes, value: bytes) -> Notification:
    oid, version, topic, state = _decode(table, key, value)
    return Notification(
        id=id_from_bytes(key),
        originator_id=oid,
        originator_version=version,
        topic=topic,
        state=state,
    )


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
