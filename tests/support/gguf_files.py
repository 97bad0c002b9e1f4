"""Small GGUF files written byte by byte (the ``gguf`` package is not installed here): a header of
version 3, no tensors, and the metadata a test asks for, so a reader walks what a real model has
ahead of its chat template (a vocabulary of strings, numbers)."""

from __future__ import annotations

import struct
from pathlib import Path

_UINT32, _STRING, _ARRAY = 4, 8, 9


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _value(value: object) -> bytes:
    if isinstance(value, str):
        return struct.pack("<I", _STRING) + _string(value)
    if isinstance(value, int):
        return struct.pack("<II", _UINT32, value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return struct.pack("<IIQ", _ARRAY, _STRING, len(value)) + b"".join(_string(v) for v in value)
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return struct.pack("<IIQ", _ARRAY, _UINT32, len(value)) + b"".join(struct.pack("<I", v) for v in value)
    raise TypeError(f"no GGUF type for {value!r}")


def gguf_bytes(metadata: dict[str, object], *, padding: int = 0) -> bytes:
    """A GGUF file's bytes: the header, ``metadata`` in order, then ``padding`` bytes standing for tensors."""
    body = b"".join(_string(key) + _value(value) for key, value in metadata.items())
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(metadata)) + body + bytes(range(256)) * (padding // 256) + b"\0" * (padding % 256)


def write_gguf(path: Path, *, chat_template: str | None = None, padding: int = 0) -> Path:
    """A GGUF at ``path`` with a small vocabulary ahead of its chat template (none when ``chat_template`` is None)."""
    metadata: dict[str, object] = {
        "general.architecture": "llama",
        "general.name": "tiny test model",
        "tokenizer.ggml.tokens": [f"tok{i}" for i in range(300)],
        "tokenizer.ggml.token_type": [1] * 300,
    }
    if chat_template is not None:
        metadata["tokenizer.chat_template"] = chat_template
    metadata["general.file_type"] = 15
    path.write_bytes(gguf_bytes(metadata, padding=padding))
    return path
