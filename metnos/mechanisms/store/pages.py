"""The records on an LMDB file's leaf pages, read straight from the file, without its tree.

When the pages that lead to the records are lost (the tree's top pages sit at the end of the
file, where a file cut short loses them first; a damaged branch page hides every leaf under it),
the leaves themselves are often whole. LMDB never changes a record in place, so every leaf page
in the file, current or left from an older transaction, holds records as they were written; a
log's records are never rewritten, so any copy of one is the record.

The layout read here is LMDB 0.9's on a 64-bit build (lmdb/libraries/liblmdb/mdb.c): a page
header of 16 bytes (page number, pad, flags, lower and upper bounds of the free space), then the
offsets of the nodes; a leaf node is its data size (two 16-bit halves), flags and key size, the
key, then the data, or the number of the overflow page that holds it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

_PAGE_HEADER = struct.Struct("<QHHHH")  # page number, pad, flags, lower, upper
_OVERFLOW_PAGES = struct.Struct("<I")  # an overflow page's count, where lower and upper would be
_NODE_HEADER = struct.Struct("<HHHH")  # data size low, data size high, flags, key size
_LEAF, _OVERFLOW, _META = 0x02, 0x04, 0x08
_BIG_DATA, _SUB_DATA, _DUP_DATA = 0x01, 0x02, 0x04
_META_PAGE_SIZE = 40


def page_size(data_file: Path) -> int:
    with open(data_file, "rb") as f:
        head = f.read(_META_PAGE_SIZE + 4)
    return struct.unpack_from("<I", head, _META_PAGE_SIZE)[0] if len(head) == _META_PAGE_SIZE + 4 else 4096


def leaf_records(data_file: Path, *, key_size: int | None = None) -> Iterator[tuple[bytes, bytes]]:
    """(key, data) of every plain record on every leaf page the file still holds whole, in page
    order; with ``key_size``, only records whose key has that many bytes."""
    size = page_size(data_file)
    with open(data_file, "rb") as f:
        pages = f.seek(0, 2) // size
        for number in range(2, pages):  # pages 0 and 1 are the two meta pages
            f.seek(number * size)
            page = f.read(size)
            yield from _records_of(f, page, number, size, pages, key_size)


def _records_of(f: object, page: bytes, number: int, size: int, pages: int, key_size: int | None) -> Iterator[tuple[bytes, bytes]]:
    pgno, _, flags, lower, upper = _PAGE_HEADER.unpack_from(page)
    if pgno != number or not flags & _LEAF or flags & (_OVERFLOW | _META) or not (_PAGE_HEADER.size <= lower <= upper <= size):
        return
    for slot in range((lower - _PAGE_HEADER.size) // 2):
        offset = struct.unpack_from("<H", page, _PAGE_HEADER.size + 2 * slot)[0]
        if offset < upper or offset + _NODE_HEADER.size > size:
            continue
        low, high, node_flags, ksize = _NODE_HEADER.unpack_from(page, offset)
        if node_flags & (_SUB_DATA | _DUP_DATA) or (key_size is not None and ksize != key_size):
            continue
        key_at = offset + _NODE_HEADER.size
        data_at = key_at + ksize
        length = low | high << 16
        if data_at > size:
            continue
        key = page[key_at:data_at]
        if node_flags & _BIG_DATA:
            data = _overflow(f, page, data_at, length, size, pages)
        elif data_at + length <= size:
            data = page[data_at : data_at + length]
        else:
            data = None
        if data is not None:
            yield key, data


def _overflow(f: object, page: bytes, at: int, length: int, size: int, pages: int) -> bytes | None:
    if at + 8 > size:
        return None
    first = struct.unpack_from("<Q", page, at)[0]
    count = -(-(length + _PAGE_HEADER.size) // size)
    if first < 2 or first + count > pages:
        return None
    f.seek(first * size)  # type: ignore[attr-defined]
    block = f.read(count * size)  # type: ignore[attr-defined]
    pgno, _, flags = struct.unpack_from("<QHH", block)
    if pgno != first or not flags & _OVERFLOW or _OVERFLOW_PAGES.unpack_from(block, 12)[0] < count:
        return None
    return block[_PAGE_HEADER.size : _PAGE_HEADER.size + length]
