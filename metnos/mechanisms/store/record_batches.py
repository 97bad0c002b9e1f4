"""A commit's records held in one value, and an aggregate's versions of one commit in one index entry.

A turn commits its events together, and they are alike: one originator, a few topics, states
that share most of their keys. Written one value an event, with an index entry an event, a commit
of twenty spread over the leaves and branches of two trees; written as one value, compressed
whole, and one index entry for each run of an aggregate's versions, it writes about what raw LMDB
appending twenty values writes (bench/log_throughput.py, (b)).

The records table holds two kinds of value under a notification id:

* a record (``records.RECORD_FORMAT``), the notification of its key, as every log before this
  held;
* a batch (``BATCH_FORMAT``), the records of the ``count`` notifications that end at its key:
  a header (format, count), then zstd of the records' lengths and the records, the format-1
  records as they would stand alone. A commit of more than ``CHUNK_RECORDS`` records (a bulk
  save, not a turn) is held in several batches (``chunks``).

The index maps ``(originator id, last version of a run)`` to the id of the run's last
notification, followed by the run's length when it is more than one: a run is an aggregate's
versions that follow one another in one commit, under ids that follow one another.

Readers see notifications, one by one, whatever holds them: ``RecordCursor`` walks the table as
an LMDB cursor would walk a table of records, and ``index_positions`` turns an index entry into
its versions and ids.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import zstandard

from metnos.mechanisms.store.errors import CorruptRecord

BATCH_FORMAT = 2
# zstd's fast level -1: a turn's records still compress to a sixteenth, in half the time of level 1
# (the commit waits on it), and decompress in half the time (a scan reads every batch).
_LEVEL = -1
# A turn commits a few dozen events; more than this are a bulk save, held in several values.
CHUNK_RECORDS = 64
CHUNK_BYTES = 32 * 1024
_BATCH_HEAD = struct.Struct(">BI")  # format, count
_LENGTH = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_RUN = struct.Struct(">QI")  # the run's last id, its length
_local = threading.local()


def _codec() -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    codec = getattr(_local, "codec", None)
    if codec is None:
        codec = _local.codec = (zstandard.ZstdCompressor(level=_LEVEL), zstandard.ZstdDecompressor())
    return codec


def chunks(records: Sequence[bytes]) -> list[tuple[int, int]]:
    """``(start, stop)`` of each value a commit's records are held in: a turn's in one, a bulk save's
    in values of at most ``CHUNK_RECORDS`` records and about ``CHUNK_BYTES`` before compression, so that
    a damaged value loses a turn, not a thousand events, and a value stays a page or two."""
    found: list[tuple[int, int]] = []
    start = size = 0
    for i, record in enumerate(records):
        if i > start and (i - start >= CHUNK_RECORDS or size + len(record) > CHUNK_BYTES):
            found.append((start, i))
            start, size = i, 0
        size += len(record)
    if records:
        found.append((start, len(records)))
    return found


def batch_value(records: Sequence[bytes]) -> bytes:
    """The value holding ``records``, to be stored under the id of the last of them."""
    lengths = struct.pack(f">{len(records)}I", *map(len, records))
    return _BATCH_HEAD.pack(BATCH_FORMAT, len(records)) + _codec()[0].compress(lengths + b"".join(records))


def is_batch(value: bytes) -> bool:
    return bool(value) and value[0] == BATCH_FORMAT


def batch_count(table: str, key: bytes, value: bytes) -> int:
    try:
        _, count = _BATCH_HEAD.unpack_from(value)
    except struct.error:
        raise CorruptRecord(table, key, f"batch of {len(value)} bytes is shorter than its header") from None
    if count < 1 or count > _U64.unpack(key)[0]:
        raise CorruptRecord(table, key, f"batch says it holds {count} records under id {_U64.unpack(key)[0]}")
    return count


def held(table: str, key: bytes, value: bytes) -> tuple[int, list[bytes]]:
    """The id of the first notification a value holds, and the records of it and those after it."""
    if len(key) != _U64.size:
        raise CorruptRecord(table, key, f"a key of {len(key)} bytes is no notification id")
    if not is_batch(value):
        return _U64.unpack(key)[0], [value]
    count = batch_count(table, key, value)
    try:
        body = _codec()[1].decompress(value[_BATCH_HEAD.size :])
    except zstandard.ZstdError as e:
        raise CorruptRecord(table, key, f"batch cannot be decompressed ({e})") from None
    records = _split(body, count)
    if records is None:
        raise CorruptRecord(table, key, "batch's lengths do not add up to its records")
    return _U64.unpack(key)[0] - count + 1, records


def _split_in_python(body: bytes, count: int) -> list[bytes] | None:
    """``_scan_loop.split_records`` where no C compiler built it: the same records, more slowly."""
    try:
        lengths = struct.unpack_from(f">{count}I", body)
    except struct.error:
        return None
    at = count * _LENGTH.size
    if at + sum(lengths) != len(body):
        return None
    records = []
    append = records.append
    for length in lengths:
        append(body[at : at + length])
        at += length
    return records


try:
    from metnos.mechanisms.store._scan_loop import split_records as _split
except ImportError:  # installed without a C compiler (see event_scan.compiled_loop)
    _split = _split_in_python


def expand(table: str, key: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
    """``(id key, record)`` for each notification a value holds, in id order."""
    first, records = held(table, key, value)
    return [(_U64.pack(number), record) for number, record in enumerate(records, first)]


def run_value(last_id: int, length: int) -> bytes:
    return _U64.pack(last_id) if length == 1 else _RUN.pack(last_id, length)


def index_positions(table: str, key: bytes, value: bytes) -> list[tuple[int, int]]:
    """``(version, notification id)`` of each event an index entry stands for, lowest first, from
    its key's version (the run's last) and its value (an id, or a run's last id and length)."""
    last_version = int.from_bytes(key[-8:], "big") - (1 << 63)
    if len(value) == _U64.size:
        return [(last_version, _U64.unpack(value)[0])]
    last_id, length = _run(table, key, value)
    first = last_version - length + 1
    return [(first + i, last_id - length + 1 + i) for i in range(length)]


def run_length(table: str, key: bytes, value: bytes) -> int:
    return 1 if len(value) == _U64.size else _run(table, key, value)[1]


def _run(table: str, key: bytes, value: bytes) -> tuple[int, int]:
    if len(value) != _RUN.size:
        raise CorruptRecord(table, key, f"an index entry of {len(value)} bytes is neither an id nor a run")
    return _RUN.unpack(value)


def runs(rows: Sequence[tuple[Any, int, str, bytes]]) -> list[tuple[Any, int, int, int]]:
    """``(originator id, first version, last version, index of its last row)`` of each run of
    ``rows``: an originator's rows, one after another, each a version after the one before."""
    found: list[tuple[Any, int, int, int]] = []
    first = last = 0
    oid: Any = None
    for i, (row_oid, version, _, _) in enumerate(rows):
        # A turn's rows share one id object: ``is`` spares UUID.__eq__, a Python call a row.
        if i and version == last + 1 and (row_oid is oid or row_oid == oid):
            last = version
            continue
        if i:
            found.append((oid, first, last, i - 1))
        oid, first, last = row_oid, version, version
    if rows:
        found.append((oid, first, last, len(rows) - 1))
    return found


class RecordCursor:
    """An LMDB cursor over the records table that stands on notifications, not on values.

    It answers what the log's readers ask of a cursor (``set_range``, ``key``, ``value``,
    ``item``, ``first``, ``last``, ``prev``, ``next``, iteration, ``iternext``) as if every
    notification were a value of its own; a batch is decompressed once, when the cursor first
    stands in it.
    """

    __slots__ = ("_cursor", "_table", "_first", "_records", "_at", "_held_key")

    def __init__(self, cursor: Any, table: str) -> None:
        self._cursor = cursor
        self._table = table
        self._first = 0
        self._records: list[bytes] = []
        self._at = -1
        self._held_key: bytes | None = None

    def _stand(self, found: bool, *, at_end: bool = False) -> bool:
        if not found:
            self._records, self._at, self._held_key = [], -1, None
            return False
        key, value = self._cursor.item()
        if key != self._held_key:
            self._first, self._records = held(self._table, key, value)
            self._held_key = key
        self._at = len(self._records) - 1 if at_end else 0
        return True

    def set_range(self, key: bytes) -> bool:
        if not self._stand(self._cursor.set_range(key)):
            return False
        wanted = _U64.unpack(key)[0] if len(key) == _U64.size else 0
        if wanted > self._first:
            self._at = min(wanted - self._first, len(self._records) - 1)
        return True

    def set_key(self, key: bytes) -> bool:
        return self.set_range(key) and self.key() == key

    def first(self) -> bool:
        return self._stand(self._cursor.first())

    def last(self) -> bool:
        return self._stand(self._cursor.last(), at_end=True)

    def next(self) -> bool:
        if self._at < 0:
            return False
        if self._at + 1 < len(self._records):
            self._at += 1
            return True
        return self._stand(self._cursor.next())

    def prev(self) -> bool:
        if self._at < 0:
            return False
        if self._at > 0:
            self._at -= 1
            return True
        return self._stand(self._cursor.prev(), at_end=True)

    def key(self) -> bytes:
        return _U64.pack(self._first + self._at) if self._at >= 0 else b""

    def value(self) -> bytes:
        return self._records[self._at] if self._at >= 0 else b""

    def item(self) -> tuple[bytes, bytes]:
        return (self.key(), self.value()) if self._at >= 0 else (b"", b"")

    def iternext(self, keys: bool = True, values: bool = True) -> Iterator[Any]:
        """From where the cursor stands, as ``lmdb.Cursor.iternext``: where it is not placed, from the first."""
        if self._at < 0 and not self.first():
            return
        pack = _U64.pack
        while True:
            records, first = self._records, self._first
            if keys:
                for at in range(self._at, len(records)):
                    self._at = at
                    yield (pack(first + at), records[at]) if values else pack(first + at)
            else:
                for at in range(self._at, len(records)):
                    self._at = at
                    yield records[at]
            if not self._stand(self._cursor.next()):
                return

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return self.iternext()
