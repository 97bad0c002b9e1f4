"""Canonical JSON bytes and their hash: how Metnos fingerprints a payload."""

from __future__ import annotations

from typing import Any

import blake3
import orjson


def canonical_json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)


def canonical_hash(value: Any) -> str:
    return "blake3:" + blake3.blake3(canonical_json(value)).hexdigest()
