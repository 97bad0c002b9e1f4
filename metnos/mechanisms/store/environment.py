"""One shared LMDB environment per path per process, with a map that grows.

py-lmdb refuses to open the same path twice in one process, and an LMDB
environment is meant to be shared by every thread of a process, so every
recorder asks this module for the environment of its path and gets the same
object back. The object also hides the two LMDB behaviours a caller must never
see: ``MapFullError`` (the map is grown and the write retried, so no commit is
lost) and ``MapResizedError`` (another process grew the map: adopt its size).
Resizing needs every transaction of this process to be finished, hence the
reader/writer gate around transactions.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import lmdb

from metnos.mechanisms.store.errors import VIEWS_DAMAGE_ADVICE, LogDamaged, LogUnavailable

T = TypeVar("T")

DEFAULT_MAP_SIZE = 256 * 1024 * 1024
DEFAULT_MAX_DBS = 128
GROWTH_FACTOR = 2
# What LMDB says when a page is not what the tree says it is (bytes over it, a file cut short);
# a transaction that met one is spoilt, and says so on its next use.
_PAGE_DAMAGE = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.BadTxnError)


class _Gate:
    """Many transactions at once, or one resize alone."""

    def __init__(self) -> None:
        # A plain lock under the condition: ``with`` on it runs in C, where an RLock's
        # Condition goes through Python on every transaction.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._active = 0
        self._resizing = False
        self._held = _Shared(self)

    def shared(self) -> _Shared:
        """A hold for one transaction (``with gate.shared():``); the same object for every one,
        since it keeps nothing of its own: a generator's context manager cost a transaction
        more than an empty LMDB commit."""
        return self._held

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._resizing = False
                self._cond.notify_all()


class _Shared:
    __slots__ = ("_gate",)

    def __init__(self, gate: _Gate) -> None:
        self._gate = gate

    def __enter__(self) -> None:
        gate = self._gate
        with gate._lock:
            while gate._resizing:
                gate._cond.wait()
            gate._active += 1

    def __exit__(self, *exc: object) -> None:
        gate = self._gate
        with gate._lock:
            gate._active -= 1
            # Only a resize waits for none to be active, and it says so first.
            if gate._active == 0 and gate._resizing:
                gate._cond.notify_all()


class SharedEnvironment:
    def __init__(self, path: Path, *, map_size: int, sync: bool, max_dbs: int, damage_advice: str = VIEWS_DAMAGE_ADVICE) -> None:
        self.path = path
        self.sync = sync
        self._gate = _Gate()
        # Writers of one process queue here rather than on LMDB's own mutex,
        # so that a thread waiting to write never holds the gate's slot that a
        # resize is waiting for.
        self._write_lock = threading.Lock()
        self._dbs: dict[bytes, object] = {}
        self._dbs_lock = threading.Lock()
        self._listeners: set[threading.Event] = set()
        self._listeners_lock = threading.Lock()
        self.refcount = 0
        # What a reader that meets a damaged page is told to do: the views' by default, the log's for the log.
        self.damage_advice = damage_advice
        check_data_file(path / DATA_FILE, damage_advice)
        try:
            path.mkdir(parents=True, exist_ok=True)
            self.env = lmdb.open(
                str(path),
                map_size=map_size,
                max_dbs=max_dbs,
                sync=sync,
                metasync=sync,
                subdir=True,
                lock=True,
                max_readers=512,
                # Readers are short-lived and taken from many threads.
                max_spare_txns=16,
            )
        except PermissionError as e:
            msg = f"cannot open the log at {path}: permission denied; choose a writable LMDB_PATH or METNOS_HOME"
            raise LogUnavailable(msg) from e
        except OSError as e:
            raise LogUnavailable(_describe_os_error(path, e)) from e
        except lmdb.Error as e:
            msg = f"cannot open the log at {path}: {e}"
            raise LogUnavailable(msg) from e

    def db(self, name: str) -> object:
        key = name.encode()
        with self._dbs_lock:
            handle = self._dbs.get(key)
            if handle is None:
                while True:
                    try:
                        with self._write_lock, self._gate.shared():
                            handle = self.env.open_db(key, create=True)
                        break
                    except lmdb.MapResizedError:
                        self._adopt_external_growth()
                    except lmdb.MapFullError:
                        self._grow()
                self._dbs[key] = handle
            return handle

    @contextmanager
    def read(self) -> Iterator[lmdb.Transaction]:
        while True:
            with self._gate.shared():
                try:
                    txn = self.env.begin(buffers=False)
                except lmdb.MapResizedError:
                    pass
                else:
                    try:
                        yield txn
                    except _PAGE_DAMAGE as e:
                        raise LogDamaged(f"{self.path / DATA_FILE} is damaged ({e}); {self.damage_advice}") from None
                    finally:
                        txn.abort()
                    return
            self._adopt_external_growth()

    def write(self, body: Callable[[lmdb.Transaction], T]) -> T:
        """Run ``body`` in one write transaction and commit it.

        ``body`` may be called more than once (after a map growth), so it
        must do nothing but LMDB operations on the transaction it is given.
        """
        while True:
            try:
                with self._write_lock, self._gate.shared():
                    txn = self.env.begin(write=True)
                    try:
                        result = body(txn)
                        txn.commit()
                    except BaseException:
                        txn.abort()
                        raise
            except lmdb.MapFullError:
                self._grow()
                continue
            except lmdb.MapResizedError:
                self._adopt_external_growth()
                continue
            except lmdb.DiskError as e:
                raise LogUnavailable(_describe_os_error(self.path, e)) from e
            except _PAGE_DAMAGE as e:
                raise LogDamaged(f"{self.path / DATA_FILE} is damaged ({e}); nothing was written; {self.damage_advice}") from None
            except lmdb.Error as e:
                if _is_disk_full(e) or self._disk_nearly_full():
                    msg = f"the disk holding the log at {self.path} is full; this batch was not written, free some space and retry"
                    raise LogUnavailable(msg) from e
                raise
            self._notify()
            return result

    def _adopt_external_growth(self) -> None:
        # Another process grew the map. LMDB lets us adopt its size (by
        # asking for size zero) only while no transaction of ours is open.
        with self._gate.exclusive():
            self.env.set_mapsize(0)

    def _grow(self) -> None:
        with self._gate.exclusive():
            current = self.env.info()["map_size"]
            self.env.set_mapsize(current * GROWTH_FACTOR)

    # In-process notification after commit; subscriptions add their events.
    def listen(self, event: threading.Event) -> None:
        with self._listeners_lock:
            self._listeners.add(event)

    def unlisten(self, event: threading.Event) -> None:
        with self._listeners_lock:
            self._listeners.discard(event)

    def _notify(self) -> None:
        with self._listeners_lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener.set()

    def _disk_nearly_full(self) -> bool:
        # LMDB reports a failed write at commit as a bare I/O error; the free
        # space tells whether the disk is why.
        try:
            stat = os.statvfs(self.path)
        except OSError:
            return False
        return stat.f_bavail * stat.f_frsize < 4 * 1024 * 1024

    def map_size(self) -> int:
        return int(self.env.info()["map_size"])

    def close(self) -> None:
        with self._gate.exclusive():
            if not self.sync:
                self.env.sync(True)
            self.env.close()


DATA_FILE = "data.mdb"
_MAGIC = 0xBEEFC0DE
# Where LMDB's two meta pages keep what a check needs (a 64-bit build): after
# the 16-byte page header, the magic; the page size sits in the free-pages
# table's first field; then the last page used and the transaction id.
_META_MAGIC, _META_PAGE_SIZE, _META_LAST_PAGE, _META_TXN = 16, 40, 136, 144


def required_size(data_file: Path) -> int | None:
    """How long the header of an LMDB data file says the file is; None if it has no header to read."""
    with open(data_file, "rb") as f:
        head = f.read(_META_TXN + 8)
        if len(head) < _META_TXN + 8 or struct.unpack_from("<I", head, _META_MAGIC)[0] != _MAGIC:
            return None
        page_size = struct.unpack_from("<I", head, _META_PAGE_SIZE)[0]
        f.seek(page_size)
        second = f.read(_META_TXN + 8)
    metas = [head]
    if len(second) == _META_TXN + 8 and struct.unpack_from("<I", second, _META_MAGIC)[0] == _MAGIC:
        metas.append(second)
    # The meta with the newest transaction is the one LMDB will use.
    newest = max(metas, key=lambda m: struct.unpack_from("<Q", m, _META_TXN)[0])
    return (struct.unpack_from("<Q", newest, _META_LAST_PAGE)[0] + 1) * page_size


def check_data_file(data_file: Path, damage_advice: str = VIEWS_DAMAGE_ADVICE) -> None:
    """Refuse a data file cut short: mapping it would end in SIGBUS on the first read past its end."""
    try:
        size = data_file.stat().st_size
    except OSError:
        return  # no file (or no folder) yet: opening says what is wrong, if anything
    if size == 0:
        return  # a new environment; whether one was expected is the workspace's to say
    try:
        wanted = required_size(data_file)
    except OSError as e:
        raise LogUnavailable(f"cannot read {data_file}: {e.strerror}") from e
    if wanted is None:
        msg = (
            f"{data_file} is not an LMDB data file (no valid header); it was left untouched. "
            f"Restore it from a backup, or move its folder aside to start that store anew; {damage_advice}"
        )
        raise LogDamaged(msg)
    if size < wanted:
        msg = (
            f"{data_file} is {size} bytes but its header says {wanted}: the file was cut short "
            f"(a copy or a disk that failed part way); it was left untouched. Restore it from a backup, or {damage_advice}"
        )
        raise LogDamaged(msg)


def _is_disk_full(error: BaseException) -> bool:
    text = str(error)
    return "No space left" in text or f"[Errno {errno.ENOSPC}]" in text or "ENOSPC" in text


def _describe_os_error(path: Path, error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno == errno.ENOSPC or _is_disk_full(error):
        return f"the disk holding the log at {path} is full; free some space and retry"
    if isinstance(error, OSError) and error.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
        return f"cannot write the log at {path}: {os.strerror(error.errno)}; choose a writable LMDB_PATH or METNOS_HOME"
    return f"cannot open the log at {path}: {error}"


_registry: dict[str, SharedEnvironment] = {}
_registry_lock = threading.Lock()


def acquire(path: Path, *, map_size: int = DEFAULT_MAP_SIZE, sync: bool = True, max_dbs: int = DEFAULT_MAX_DBS,
            damage_advice: str = VIEWS_DAMAGE_ADVICE) -> SharedEnvironment:
    """The environment for ``path``, opened on first use and shared after; ``damage_advice``: what a
    user who meets a damaged page of it is told to do."""
    key = os.path.realpath(path)
    with _registry_lock:
        shared = _registry.get(key)
        if shared is None:
            shared = SharedEnvironment(Path(key), map_size=map_size, sync=sync, max_dbs=max_dbs, damage_advice=damage_advice)
            _registry[key] = shared
        shared.refcount += 1
        return shared


def release(shared: SharedEnvironment) -> None:
    """Close the environment when its last user lets go of it."""
    with _registry_lock:
        shared.refcount -= 1
        if shared.refcount > 0:
            return
        if _registry.get(str(shared.path)) is shared:
            del _registry[str(shared.path)]
    shared.close()
