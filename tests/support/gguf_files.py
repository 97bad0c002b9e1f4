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


# A model llama.cpp really loads: a llama of one block, embeddings of 16, a vocabulary of the 256
# bytes and three specials, every weight zero (some 50 KB). It answers nonsense, fast; what a test
# asks of it is what the server does around the model (the template it renders, /props).

def _f32(value: float) -> bytes:
    return struct.pack("<If", 6, value)


def _tensor_table(tensors: list[tuple[str, list[int]]]) -> tuple[bytes, bytes]:
    """GGUF's tensor infos (name, dims, type F32, offset) and the zeroed data, each tensor aligned to 32 bytes."""
    infos, data = b"", b""
    for name, dims in tensors:
        size = 4
        for d in dims:
            size *= d
        infos += _string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", 0, len(data))
        data += b"\0" * (size + (-size) % 32)
    return infos, data


def write_tiny_llama(path: Path, *, chat_template: str | None) -> Path:
    embd, ff = 16, 32
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    entries = [
        _string("general.architecture") + _value("llama"),
        _string("general.name") + _value("tiny test llama"),
        _string("llama.context_length") + _value(256),
        _string("llama.embedding_length") + _value(embd),
        _string("llama.block_count") + _value(1),
        _string("llama.feed_forward_length") + _value(ff),
        _string("llama.attention.head_count") + _value(2),
        _string("llama.attention.head_count_kv") + _value(2),
        _string("llama.attention.layer_norm_rms_epsilon") + _f32(1e-5),
        _string("llama.rope.dimension_count") + _value(embd // 2),
        _string("tokenizer.ggml.model") + _value("llama"),
        _string("tokenizer.ggml.tokens") + _value(tokens),
        _string("tokenizer.ggml.scores") + struct.pack("<IIQ", _ARRAY, 6, len(tokens)) + b"\0\0\0\0" * len(tokens),
        # unknown, control, control, then 256 byte tokens
        _string("tokenizer.ggml.token_type") + struct.pack("<IIQ", _ARRAY, 5, len(tokens))
        + b"".join(struct.pack("<i", t) for t in [2, 3, 3] + [6] * 256),
        _string("tokenizer.ggml.bos_token_id") + _value(1),
        _string("tokenizer.ggml.eos_token_id") + _value(2),
    ]
    if chat_template is not None:
        entries.append(_string("tokenizer.chat_template") + _value(chat_template))
    block = [("attn_norm", [embd]), ("attn_q", [embd, embd]), ("attn_k", [embd, embd]), ("attn_v", [embd, embd]),
             ("attn_output", [embd, embd]), ("ffn_norm", [embd]), ("ffn_gate", [embd, ff]), ("ffn_up", [embd, ff]),
             ("ffn_down", [ff, embd])]
    tensors = [("token_embd.weight", [embd, len(tokens)]), ("output_norm.weight", [embd]), ("output.weight", [embd, len(tokens)])]
    tensors += [(f"blk.0.{name}.weight", dims) for name, dims in block]
    infos, data = _tensor_table(tensors)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(entries)) + b"".join(entries) + infos
    path.write_bytes(head + b"\0" * ((-len(head)) % 32) + data)
    return path
