"""What a GGUF file says about itself: its magic bytes, and the chat template its metadata carries.

GGUF (llama.cpp's model format, versions 2 and 3, little-endian) opens with ``GGUF``, a version,
the tensor count and the count of metadata entries; each entry is a key, a type and a value.
Only the metadata is walked, never the tensors: the vocabulary arrays ahead of the template
are skipped by their lengths, so a model of gigabytes is read in a few milliseconds of its
first megabytes. Hand-written rather than the ``gguf`` package because that package maps every
tensor with numpy to answer the same question, and Metnos asks it at each start of a server.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

MAGIC = b"GGUF"
CHAT_TEMPLATE_KEY = "tokenizer.chat_template"

# The value types of the format, by their code: the fixed sizes, then string (8) and array (9).
_FIXED_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING = 8
_ARRAY = 9


class NotGGUF(ValueError):
    """The file is not a GGUF file, or its metadata cannot be read."""


def is_gguf(path: Path) -> bool:
    """Whether ``path`` starts with the GGUF magic bytes."""
    try:
        with path.open("rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def chat_template_of(path: Path) -> str | None:
    """The chat template the GGUF's metadata carries (``tokenizer.chat_template``), or None when it has none.

    Raises :class:`NotGGUF` for a file that is not a GGUF of version 2 or 3, or whose metadata is cut short."""
    with path.open("rb") as f:
        try:
            view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:
            raise NotGGUF(f"{path} is empty, not a GGUF file") from None
    with view:
        return _metadata_string(view, CHAT_TEMPLATE_KEY, path)


def _metadata_string(view: mmap.mmap, wanted: str, path: Path) -> str | None:
    if view[:4] != MAGIC:
        raise NotGGUF(f"{path} is not a GGUF file (it starts with {bytes(view[:4])!r}, not {MAGIC!r})")
    try:
        version, _tensors, entries = struct.unpack_from("<IQQ", view, 4)
        if version not in (2, 3):
            raise NotGGUF(f"{path} is GGUF version {version}; Metnos reads the metadata of versions 2 and 3")
        at = 24
        for _ in range(entries):
            key, at = _string(view, at)
            (kind,) = struct.unpack_from("<I", view, at)
            at += 4
            if key == wanted and kind == _STRING:
                return _string(view, at)[0]
            at = _skip(view, kind, at)
    except (struct.error, UnicodeDecodeError, IndexError) as e:
        raise NotGGUF(f"{path}: the GGUF metadata is cut short or damaged ({e})") from None
    return None


def _string(view: mmap.mmap, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<Q", view, at)
    start = at + 8
    if start + length > len(view):
        raise IndexError("a string runs past the end of the file")
    return view[start:start + length].decode("utf-8"), start + length


def _skip(view: mmap.mmap, kind: int, at: int) -> int:
    if kind in _FIXED_SIZES:
        return at + _FIXED_SIZES[kind]
    if kind == _STRING:
        (length,) = struct.unpack_from("<Q", view, at)
        return at + 8 + length
    if kind == _ARRAY:
        item, count = struct.unpack_from("<IQ", view, at)
        at += 12
        if item in _FIXED_SIZES:
            return at + count * _FIXED_SIZES[item]
        for _ in range(count):  # strings (the vocabulary) or nested arrays: each says its own length
            at = _skip(view, item, at)
            if at > len(view):
                raise IndexError("an array runs past the end of the file")
        return at
    raise IndexError(f"unknown metadata value type {kind}")
