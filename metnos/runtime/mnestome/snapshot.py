"""Monthly snapshots of the mnestome view (seeds/004 ch. 10), zstd-compressed.

The view is derived from the log, so a snapshot is not a backup of a source
of truth: it is the graph as it stood in a month, kept for history and for
whoever wants to see how Metnos moved over time. One file a month, written
the first time the ager runs in it and never rewritten.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import orjson
import zstandard

LEVEL = 10


def snapshot_path(data_dir: Path, at: datetime) -> Path:
    return data_dir / "snapshots" / f"mnestome-{at:%Y-%m}.json.zst"


def write_snapshot(state_bytes: bytes, data_dir: Path, at: datetime, *, position: int | None = None) -> Path | None:
    """Write this month's snapshot unless it exists; returns the path written, or None."""
    path = snapshot_path(data_dir, at)
    if path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    header = orjson.dumps({"taken_at": at.isoformat(), "position": position})
    payload = zstandard.ZstdCompressor(level=LEVEL).compress(header + b"\n" + state_bytes)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(payload)
    os.replace(tmp, path)
    return path


def read_snapshot(path: Path) -> tuple[dict, dict]:
    """(header, view state) of a snapshot."""
    raw = zstandard.ZstdDecompressor().decompress(path.read_bytes())
    header, _, state = raw.partition(b"\n")
    return orjson.loads(header), orjson.loads(state)
