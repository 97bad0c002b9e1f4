"""Who is still writing a turn: a lock file its writer holds, which the kernel lets go.

The process running a turn creates ``.runtime/turns/<turn id>.lock`` and holds
an exclusive ``flock`` on it from before the turn's first event is committed
until after its last. However the process ends (SIGKILL included) the kernel
drops the lock, and a power cut ends every lock; so an open turn whose lock
another process can take has no writer left, and may be closed as abandoned.
Another closer that finds the lock taken leaves the turn alone: locks also keep
two closers from closing one turn twice.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from domain.errors import MetnosError
from metnos.settings.workspace import Workspace


class LeaseError(MetnosError):
    """The lock file of a turn cannot be made."""


def lock_dir(workspace: Workspace) -> Path:
    return workspace.runtime_dir / "turns"


def lock_path(workspace: Workspace, turn_id: str) -> Path:
    return lock_dir(workspace) / f"{turn_id}.lock"


class TurnLease:
    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def take(cls, workspace: Workspace, turn_id: str) -> TurnLease:
        """The writer's lease on a new turn; the lock file is durable before the turn's first commit."""
        folder = lock_dir(workspace)
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            lease = cls.claim(workspace, turn_id, create=True)
            # A power cut must not keep the file and lose the turn's events,
            # nor the reverse in a way that hides a writer: the file is made
            # durable before anything of the turn is committed.
            dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as e:
            msg = f"cannot make the lock file of a turn in {folder}: {e.strerror or e}"
            raise LeaseError(msg) from None
        if lease is None:
            msg = f"the lock of turn {turn_id} is already held; a turn id was given twice"
            raise LeaseError(msg)
        return lease

    @classmethod
    def claim(cls, workspace: Workspace, turn_id: str, *, create: bool) -> TurnLease | None:
        """The lock if nobody holds it (None if its writer still does, or if there is no file and ``create`` is false)."""
        path = lock_path(workspace, turn_id)
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        while True:
            try:
                fd = os.open(path, flags, 0o600)
            except FileNotFoundError:
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            if _still_named(path, fd):
                return cls(path, fd)
            # A sweeper removed the file between our open and our lock: that lock guards nothing.
            os.close(fd)
            if not create:
                return None

    def release(self) -> None:
        """Remove the file while still holding it, so nobody takes a lock on a file about to vanish."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def _still_named(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
