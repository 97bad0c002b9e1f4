"""The state of a path on disk, taken down to the bytes and put back.

A *node* is plain JSON, so it can sit in an event: ``{"type": "missing"}``, a
file (size, blake3, mode), a symlink (its target) or a folder (mode and its
entries by name). Taken with a blob store, every file's bytes are kept there
under their digest, which is what lets undo put them back byte for byte.
Taking is bounded: a tree above the caps is refused with the reason rather
than kept in part. Putting back writes every file to a temporary name and
renames it over the old one, so a crash in the middle never leaves a
half-written file.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3

from metnos.mechanisms.blobs import PREFIX, BlobStore
import ctypes

MISSING: dict[str, Any] = {"type": "missing"}
_CHUNK = 1 << 20


class NotCapturable(Exception):
    """The path cannot be kept whole: too large, or not a file, folder or symlink."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    """How much one path may hold and still be kept for undo."""

    max_entries: int = 5000
    max_bytes: int = 64 * 1024 * 1024


def _measure(path: Path, limits: Limits) -> None:
    """Refuse early, before any byte is hashed or stored."""
    entries = 0
    size = 0
    stack = [path]
    while stack:
        p = stack.pop()
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        entries += 1
        if entries > limits.max_entries:
            raise NotCapturable(f"more than {limits.max_entries} entries under {path}")
        if stat.S_ISREG(st.st_mode):
            size += st.st_size
            if size > limits.max_bytes:
                raise NotCapturable(f"more than {limits.max_bytes} bytes under {path}")
        elif stat.S_ISDIR(st.st_mode):
            try:
                stack.extend(p / name for name in os.listdir(p))
            except PermissionError:
                raise NotCapturable(f"{p} cannot be listed") from None
        elif not stat.S_ISLNK(st.st_mode):
            raise NotCapturable(f"{p} is not a file, folder or symlink")


def _file_digest(path: Path, blobs: BlobStore | None) -> tuple[int, str]:
    if blobs is not None:
        data = path.read_bytes()
        return len(data), blobs.put(data, sync=False)
    h = blake3.blake3()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, PREFIX + h.hexdigest()


def _node(path: Path, blobs: BlobStore | None) -> dict[str, Any]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return dict(MISSING)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return {"type": "symlink", "target": os.readlink(path), "mtime": st.st_mtime_ns}
    if stat.S_ISREG(st.st_mode):
        size, digest = _file_digest(path, blobs)
        return {"type": "file", "size": size, "hash": digest, "mode": mode, "mtime": st.st_mtime_ns}
    if stat.S_ISDIR(st.st_mode):
        entries = {name: _node(path / name, blobs) for name in sorted(os.listdir(path))}
        # Read after the entries: listing does not change it, and they are what it dates.
        return {"type": "dir", "mode": mode, "entries": entries, "mtime": os.lstat(path).st_mtime_ns}
    raise NotCapturable(f"{path} is not a file, folder or symlink")


def take(path: Path, *, blobs: BlobStore | None = None, limits: Limits | None = None) -> dict[str, Any]:
    """The node at ``path``; with ``blobs``, every file's bytes are kept there too.

    With ``limits``, a tree above them raises NotCapturable; so does an
    unreadable file or a special file (a socket, a device).
    """
    if limits is not None:
        _measure(path, limits)
    try:
        node = _node(path, blobs)
    except PermissionError as e:
        raise NotCapturable(f"{e.filename or path} cannot be read") from None
    if blobs is not None and digests(node):
        # The blobs must be on disk before the event that names them commits.
        sync_filesystem(blobs.root)
    return node


def first_missing(path: Path) -> Path | None:
    """The topmost folder on the way to ``path`` that does not exist (or ``path`` itself)."""
    if os.path.lexists(path):
        return None
    top = path
    for parent in path.parents:
        if os.path.lexists(parent):
            break
        top = parent
    return top


def same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """The same content: type, bytes, modes, targets, entries; modification times aside.

    A time is put back, but a file whose bytes and mode are as the turn left
    them is the turn's file still (and nodes recorded before times were kept
    have none).
    """
    return _timeless(a) == _timeless(b)


def only_mode_differs(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """The same bytes, targets and entries, but not the same modes (here or inside a folder)."""
    return not same(a, b) and _timeless(a, keep_modes=False) == _timeless(b, keep_modes=False)


def describe_modes(node: dict[str, Any]) -> str:
    """``describe`` with the node's mode, for a change that is only a mode's."""
    mode = node.get("mode")
    return describe(node) + (f" with mode {mode:04o}" if isinstance(mode, int) else "")


def _timeless(node: dict[str, Any] | None, *, keep_modes: bool = True) -> Any:
    if node is None:
        return None
    out = {k: v for k, v in node.items() if k != "mtime" and (keep_modes or k != "mode")}
    if node.get("type") == "dir":
        out["entries"] = {name: _timeless(child, keep_modes=keep_modes) for name, child in node["entries"].items()}
    return out


def digests(node: dict[str, Any]) -> list[str]:
    """Every file digest a node needs from the blob store to be put back."""
    if node["type"] == "file":
        return [node["hash"]]
    if node["type"] == "dir":
        return [d for child in node["entries"].values() for d in digests(child)]
    return []


def describe(node: dict[str, Any]) -> str:
    t = node.get("type")
    if t == "missing":
        return "nothing"
    if t == "file":
        return f"a file of {node['size']} bytes ({node['hash'][len(PREFIX):][:12]})"
    if t == "symlink":
        return f"a symlink to {node['target']}"
    if t == "dir":
        return f"a folder of {len(node['entries'])} entries"
    return "something Metnos could not check"


# -- putting back ---------------------------------------------------------------
#
# In three phases, so that nothing on disk changes until every byte needed is
# fetched, checked against its digest and flushed: plan the operations, stage
# each file's bytes in a staging folder of the workspace (never in the user's
# folders), then remove, create and rename into place. A rename is atomic, so
# a crash leaves each file either as it was or as it should be, never
# half-written. Where the staging folder is on another file system than the
# target, a rename cannot cross: the bytes are copied to a hidden name beside
# the target (``leftover_of``) and renamed from there; a kill in that window
# leaves that one name, which the next undo removes.

_syncfs: Any = None
LEFTOVER_SUFFIX = ".metnos-undo"


def sync_filesystem(path: Path) -> None:
    """One flush for many files: an fsync apiece costs about 4 ms here."""
    global _syncfs
    if _syncfs is None:
        _syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", False)
    fd = os.open(path, os.O_RDONLY)
    try:
        if not _syncfs or _syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def leftover_of(path: Path) -> Path:
    """The one name a cross-file-system put-back may leave beside ``path`` if killed."""
    return path.with_name(f".{path.name}{LEFTOVER_SUFFIX}")


def _plan(path: Path, want: dict[str, Any], have: dict[str, Any], ops: list[tuple]) -> None:
    if want == have:
        return
    kind = want["type"]
    if kind == "missing":
        ops.append(("remove", path, have))
        return
    if kind == "dir":
        if have["type"] != "dir":
            ops.append(("remove", path, have))
            ops.append(("mkdir", path))
            have = {"type": "dir", "mode": 0o700, "entries": {}}
        else:
            # The folder may have been left read-only; its entries come first.
            ops.append(("chmod", path, 0o700))
        for name, child in have["entries"].items():
            if name not in want["entries"]:
                ops.append(("remove", path / name, child))
        for name, child in want["entries"].items():
            _plan(path / name, child, have["entries"].get(name, MISSING), ops)
        ops.append(("chmod", path, want["mode"]))
        ops.append(("times", path, want))  # last: every change inside has moved it
        return
    if kind == "file" and have["type"] == "file" and have["hash"] == want["hash"]:
        ops.append(("chmod", path, want["mode"]))
        ops.append(("times", path, want))
        return
    if kind not in ("file", "symlink"):
        raise NotCapturable(f"cannot put back {describe(want)} at {path}")
    if have["type"] == "dir":
        ops.append(("remove", path, have))
    ops.append(("place", path, want))


def _set_times(path: Path, want: dict[str, Any]) -> None:
    if "mtime" in want:
        os.utime(path, ns=(want["mtime"], want["mtime"]), follow_symlinks=False)


def _stage(ops: list[tuple], room: Path, blobs: BlobStore) -> dict[Path, Path]:
    staged: dict[Path, Path] = {}
    for op in ops:
        if op[0] != "place":
            continue
        _, path, want = op
        tmp = room / str(len(staged))
        if want["type"] == "symlink":
            os.symlink(want["target"], tmp)
        else:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(blobs.get(want["hash"]))
                os.fchmod(f.fileno(), want["mode"])
        _set_times(tmp, want)
        staged[path] = tmp
    return staged


def _carry_out(ops: list[tuple], staged: dict[Path, Path], room: Path, *, same_fs: bool) -> None:
    for op in ops:
        if op[0] == "remove":
            _remove(op[1], op[2], room if same_fs else None)
        elif op[0] == "mkdir":
            op[1].parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(op[1], 0o700)
        elif op[0] == "chmod":
            os.chmod(op[1], op[2])
        elif op[0] == "times":
            _set_times(op[1], op[2])
        else:
            path = op[1]
            path.parent.mkdir(parents=True, exist_ok=True)
            source = staged[path]
            if not same_fs:
                beside = leftover_of(path)
                _copy_exactly(source, beside)
                source = beside
            os.replace(source, path)


def _copy_exactly(source: Path, target: Path) -> None:
    if target.is_symlink() or target.exists():
        target.unlink()
    if source.is_symlink():
        os.symlink(os.readlink(source), target)
    else:
        shutil.copyfile(source, target)
        shutil.copystat(source, target)
        with open(target, "rb") as f:
            os.fsync(f.fileno())
    st = os.lstat(source)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def _remove(path: Path, have: dict[str, Any], room: Path | None) -> None:
    if have["type"] == "dir":
        if room is not None:
            # Out of the user's folder in one rename, then deleted at leisure:
            # a kill never leaves a folder half-emptied.
            aside = room / f"removed-{os.urandom(4).hex()}"
            os.rename(path, aside)
            shutil.rmtree(aside)
        else:
            shutil.rmtree(path)
    elif have["type"] != "missing":
        path.unlink()


def put_back(
    path: Path, want: dict[str, Any], blobs: BlobStore, *, staging: Path, created_from: Path | None = None,
) -> None:
    """Make ``path`` exactly ``want`` again (bytes, modes, times), fetching file bytes from ``blobs``.

    ``staging`` is a folder of Metnos's own where the bytes wait before they
    are renamed into place. ``created_from`` is the topmost folder that did
    not exist when ``want`` was taken: folders the change made on the way are
    removed again if empty.
    """
    ops: list[tuple] = []
    _plan(path, want, take(path), ops)
    if ops:
        anchor = next(p for p in path.parents if p.is_dir())
        staging.mkdir(parents=True, exist_ok=True, mode=0o700)
        same_fs = os.stat(staging).st_dev == os.stat(anchor).st_dev
        room = staging / f"put-back-{os.urandom(6).hex()}"
        os.mkdir(room, 0o700)
        try:
            staged = _stage(ops, room, blobs)
            if staged:
                sync_filesystem(room)
            _carry_out(ops, staged, room, same_fs=same_fs)
        finally:
            shutil.rmtree(room, ignore_errors=True)
        sync_filesystem(anchor)
    if want["type"] == "missing" and created_from is not None and created_from != path:
        folder = path.parent
        while folder == created_from or created_from in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                break  # not empty: something else lives there now
            folder = folder.parent
