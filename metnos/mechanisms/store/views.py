"""Where materialised views live: an LMDB environment beside the log.

Each view is a tracking recorder of its own (one table per view), whose state
and position are written in one transaction. Views are derived data: they are
kept without fsync, since a crash loses at most the last folds, state and
position together, and the next catch-up folds them again.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eventsourcing.persistence import Tracking

from metnos.mechanisms.store import environment as environments
from metnos.mechanisms.store.lmdb import LMDBTrackingRecorder

# The name views track the log under: the eventsourcing application's name.
UPSTREAM = "metnos"

_STATE = b"state"
_VERSION = b"version"


class ViewStore(LMDBTrackingRecorder):
    def __init__(self, shared: environments.SharedEnvironment, table_name: str, **kwargs: Any) -> None:
        super().__init__(shared, table_name, **kwargs)
        self._data_db = shared.db(table_name + ".data")
        self._lock_path = shared.path / f"{table_name}.lock"

    @contextmanager
    def folding(self) -> Iterator[None]:
        """One process at a time folds into this view.

        Two processes catching up at once would both fold the same events:
        the second to record its position would find it taken, and a lines
        view would get its lines twice. The second waits, then folds only
        what the first left. Where the lock cannot even be created (a full
        disk), the fold goes on without it: it will not be able to write.
        """
        try:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
                raise
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @classmethod
    def open(cls, views_dir: Path, view: str) -> ViewStore:
        shared = environments.acquire(views_dir, sync=False)
        return cls(shared, f"view_{view}")

    def close(self) -> None:
        environments.release(self.shared)

    def get_state(self, view: str) -> bytes | None:
        with self.shared.read() as txn:
            return txn.get(_STATE, db=self._data_db)

    def get_version(self, view: str) -> int | None:
        with self.shared.read() as txn:
            raw = txn.get(_VERSION, db=self._data_db)
            return None if raw is None else int(raw)

    def put_state(self, view: str, version: int, state: bytes, tracking: Tracking) -> None:
        def body(txn: Any) -> None:
            txn.put(_STATE, state, db=self._data_db)
            txn.put(_VERSION, str(version).encode(), db=self._data_db)

        self._write_tracked(tracking, body)

    def reset(self, view: str) -> None:
        def body(txn: Any) -> None:
            txn.drop(self._data_db, delete=False)
            txn.drop(self._tracking_db, delete=False)

        self.shared.write(body)
