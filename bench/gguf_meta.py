"""Read the metadata of a GGUF file (its header's key-value pairs), without loading the tensors.

The agent benchmark reads the model's own chat template from it, for the plain
loops (what a llama-server user gets by default), and the model's name.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize("<" + fmt)
    return struct.unpack("<" + fmt, f.read(size))[0]


def _string(f: BinaryIO) -> str:
    return f.read(_read(f, "Q")).decode("utf-8", errors="replace")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        inner, n = _read(f, "I"), _read(f, "Q")
        return [_value(f, inner) for _ in range(n)]
    return _read(f, _SCALARS[kind])


def gguf_metadata(path: Path, *, skip_prefix: str = "tokenizer.ggml.") -> dict[str, Any]:
    """The header's key-value pairs; the big vocabulary arrays are read past but not kept."""
    with Path(path).open("rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        _version, _tensors, count = _read(f, "I"), _read(f, "Q"), _read(f, "Q")
        out: dict[str, Any] = {}
        for _ in range(count):
            key = _string(f)
            value = _value(f, _read(f, "I"))
            if not key.startswith(skip_prefix):
                out[key] = value
        return out
