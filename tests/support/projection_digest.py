"""A projection's bytes as one digest, read off the disk: what `metnos rebuild` wrote.

A view is its two LMDB databases in ``data/views`` (``view_NAME.data``: the
folded state and the fold's version; ``view_NAME.tracking``: the log position
it stands at), and, for a view of daily lines, the JSONL files it appends to.
The databases are read key by key in LMDB's order, never as the raw data.mdb,
whose free pages differ between two writes of the same content. Nothing of
Metnos is imported: the digest is of what a user's disk holds, whichever code
wrote it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import lmdb

# Where a view of daily lines writes its files, under the data dir (docs/turns.md, "Projections").
LINES_DIRS = {"audit": Path(".audit") / "executors", "turn_lines": Path("turns")}
_PARTS = (".data", ".tracking")


def _framed(digest: hashlib._Hash, *chunks: bytes) -> None:
    for chunk in chunks:
        digest.update(len(chunk).to_bytes(8, "big"))
        digest.update(chunk)


def view_databases(data_dir: Path) -> list[str]:
    """The names of every database in the views' LMDB environment."""
    env = lmdb.open(str(data_dir / "views"), readonly=True, lock=False, max_dbs=0)
    try:
        with env.begin() as txn:
            return sorted(key.decode() for key, _ in txn.cursor())
    finally:
        env.close()


def projection_digests(data_dir: Path, names: list[str]) -> dict[str, str]:
    """name -> "sha256:<hex>" of each named view, as it stands on disk now."""
    env = lmdb.open(str(data_dir / "views"), readonly=True, lock=False, max_dbs=256)
    try:
        digests = {}
        for name in sorted(names):
            digest = hashlib.sha256()
            for part in _PARTS:
                db_name = f"view_{name}{part}".encode()
                try:
                    db = env.open_db(db_name, create=False)
                except lmdb.NotFoundError:
                    msg = f"the views hold no database {db_name.decode()}: `metnos rebuild` did not write projection {name}"
                    raise AssertionError(msg) from None
                _framed(digest, db_name)
                with env.begin(db=db) as txn:
                    for key, value in txn.cursor():
                        _framed(digest, key, value)
            lines = LINES_DIRS.get(name)
            if lines is not None:
                for path in sorted((data_dir / lines).glob("*.jsonl")):
                    _framed(digest, path.name.encode(), path.read_bytes())
            digests[name] = "sha256:" + digest.hexdigest()
        return digests
    finally:
        env.close()
