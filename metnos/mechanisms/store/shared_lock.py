"""A lock that every process writing one PostgreSQL log sees: a session-level advisory lock.

Two daemons on different machines share no lock file, only the database. A
PostgreSQL advisory lock is held by a connection; the server lets it go when
that connection ends, however the holder ends (SIGKILL included, and a
machine gone once the server notices its connection dropped). So it is the
database's counterpart of the ``flock`` a process takes on a workspace's lock
file. The lock's connection is its own, not one of the log's pool: a pool
connection given back would keep the lock, and a small pool would be starved.

On a log that is not on PostgreSQL (LMDB, SQLite, in memory) only this
machine's processes write it, so there is nothing to share: the lock is
taken at once and holds nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from domain.errors import MetnosError
from metnos.mechanisms.store.errors import LogUnavailable

# How often a wait for the lock asks again.
_POLL_S = 0.05


class SharedLockBusy(MetnosError):
    """Another process sharing the log holds the lock."""


def is_shared(log: Any) -> bool:
    """Whether ``log`` is on PostgreSQL, where processes of other machines write it too."""
    return type(log.recorder).__module__.startswith("eventsourcing.postgres")


def lock_key(name: str) -> int:
    """The advisory lock's 64-bit key for ``name`` (one name, one key, in every process)."""
    digest = hashlib.blake2b(f"metnos:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def shared_lock(log: Any, name: str, *, wait_s: float = 0.0) -> Iterator[None]:
    """Hold the lock ``name`` across every process of ``log`` for the block; SharedLockBusy if it is
    still held by another after ``wait_s`` seconds."""
    if not is_shared(log):
        yield
        return
    connection = _connect(log.recorder.datastore)
    try:
        key = lock_key(name)
        deadline = time.monotonic() + wait_s
        while not connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            if time.monotonic() >= deadline:
                msg = f"another Metnos process sharing this PostgreSQL log holds the {name} lock; try again"
                raise SharedLockBusy(msg)
            time.sleep(_POLL_S)
        yield
        # Closing the connection would let the lock go too; unlocking first says so to the server at once.
        connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
    finally:
        connection.close()


def _connect(datastore: Any) -> Any:
    # psycopg is the PostgreSQL log's own dependency (the postgres extra): imported only when that log is used.
    import psycopg  # noqa: PLC0415

    settings = {k: v for k, v in datastore.pool.kwargs.items() if k != "row_factory"}
    try:
        return psycopg.connect(**settings, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as e:
        where = f"{settings.get('host')}:{settings.get('port')}/{settings.get('dbname')}"
        msg = f"cannot reach the PostgreSQL log at {where} to take a lock: {e}; check that the server is up and POSTGRES_* name it"
        raise LogUnavailable(msg) from None
