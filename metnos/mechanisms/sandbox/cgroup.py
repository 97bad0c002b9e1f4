"""A cgroup per invocation: one process cap and one memory cap for the tree.

RLIMIT_NPROC is skipped by the kernel for the real root user, and RLIMIT_AS
is per process (twelve children of 120 MB each pass a 256 MB rlimit), so the
caps that hold for a whole invocation are ``pids.max`` and the memory limit of
a cgroup holding every process of it.

Under cgroup v2 one group carries both (``pids.max``, ``memory.max``, with
``memory.oom.group`` so that the kernel kills the whole group at once); it
works where the controllers are delegated to the cgroup Metnos runs in. Under
cgroup v1 each controller has its own hierarchy, and a group is made in each
one that lets us. Invocation groups are made directly under the cgroup
Metnos runs in, so nothing is left in someone else's tree once they are
removed. Where no memory controller can be used the caller falls back to a
watchdog (``metnos.mechanisms.sandbox.memwatch``).

Joining has to happen before bwrap forks (v1 moves a process, not its
descendants). Moving another process into a group takes a global lock that
first waits for an RCU grace period (about 10 ms on this machine's kernel,
in the spawn's critical path); a thread moving *itself* under v1 (pid 0
written to ``tasks``) does not take it. So where that is allowed the
spawning thread steps into the groups, spawns, and steps back
(``enter_this_thread``): the child is born in them and nothing is moved. The
group is also how everything is killed at the end: its member list is
complete even for processes that left the process group.
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

_PREFIX = "metnos-inv-"


@dataclass(frozen=True)
class Mount:
    path: Path
    is_v2: bool
    controllers: frozenset[str]


def _mounts() -> list[Mount]:
    """The cgroup hierarchies mounted here and the controllers each carries."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(rfields) < 3:
            continue
        if rfields[0] == "cgroup":
            ctrls = frozenset(rfields[2].split(",")) & {"pids", "memory"}
            if ctrls:
                out.append(Mount(Path(fields[4]), False, ctrls))
        elif rfields[0] == "cgroup2":
            out.append(Mount(Path(fields[4]), True, frozenset()))
    return out


def _own_path(m: Mount) -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, ctrls, path = line.split(":", 2)
        if (m.is_v2 and hid == "0") or (not m.is_v2 and m.controllers & set(ctrls.split(","))):
            return m.path / path.lstrip("/")
    return m.path


# Plain os calls for the files read and written at every invocation: a
# cgroup file is one small read or write, and pathlib's text layer (an
# encoding lookup, a buffered wrapper) costs more than the kernel's side.
def _write(path: Path | str, value: str) -> None:
    # No O_CREAT: a cgroup's files come with it, and one this kernel lacks
    # is FileNotFoundError, not a new file.
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _write_if_there(path: Path | str, value: str) -> None:
    """For a file only some kernels have (swap accounting)."""
    try:
        _write(path, value)
    except FileNotFoundError:
        pass


def _read(path: Path | str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


def _try_group(parent: Path, limits: dict[str, str]) -> None:
    """Make a probe group under ``parent`` and set ``limits`` in it."""
    probe = parent / f"{_PREFIX}probe-{uuid.uuid4().hex[:8]}"
    probe.mkdir()
    try:
        for name, value in limits.items():
            _write(probe / name, value)
    finally:
        probe.rmdir()


@dataclass(frozen=True)
class Placement:
    """Where invocation groups are made, per controller, and why not when not."""

    pids: Path | None
    memory: Path | None
    memory_v2: bool
    pids_error: str | None
    memory_error: str | None
    # cgroup v1 only: the calling thread can step into an invocation's
    # groups and back on its own (see ``enter_this_thread``).
    thread_moves: bool = False

    @property
    def memory_mechanism(self) -> str:
        if self.memory is None:
            return "watchdog"
        return "cgroup-v2" if self.memory_v2 else "cgroup-v1"


@functools.lru_cache(maxsize=1)
def placement() -> Placement:
    """Find, once, the hierarchies where this process may make child groups."""
    pids = memory = None
    memory_v2 = False
    errors: dict[str, list[str]] = {"pids": [], "memory": []}
    mounts = _mounts()
    # v2 first: one group for both caps, and a kernel that kills it whole.
    for m in (m for m in mounts if m.is_v2):
        own = _own_path(m)
        try:
            available = set((own / "cgroup.subtree_control").read_text().split())
            missing = {"pids", "memory"} - available
            if missing:
                # Possible only where we are the root of the delegated tree
                # (a process may not enable controllers for its own siblings).
                _write(own / "cgroup.subtree_control", " ".join("+" + c for c in sorted(missing)))
            _try_group(own, {"pids.max": "1", "memory.max": str(64 << 20)})
            pids = memory = own
            memory_v2 = True
            break
        except OSError as e:
            for c in ("pids", "memory"):
                errors[c].append(f"{own}: {e.strerror or e}")
    for m in (m for m in mounts if not m.is_v2):
        own = _own_path(m)
        if "pids" in m.controllers and pids is None:
            try:
                _try_group(own, {"pids.max": "1"})
                pids = own
            except OSError as e:
                errors["pids"].append(f"{own}: {e.strerror or e}")
        if "memory" in m.controllers and memory is None:
            try:
                _try_group(own, {"memory.limit_in_bytes": str(64 << 20)})
                memory = own
            except OSError as e:
                errors["memory"].append(f"{own}: {e.strerror or e}")

    def why(c: str, found: Path | None) -> str | None:
        if found is not None:
            return None
        return "; ".join(errors[c]) or f"no cgroup hierarchy with the {c} controller is mounted"

    homes = [d for d in dict.fromkeys((pids, memory)) if d is not None]
    thread_moves = bool(homes) and not memory_v2 and _can_step_back(homes)
    return Placement(pids, memory, memory_v2, why("pids", pids), why("memory", memory), thread_moves)


def _move_this_thread(group: Path) -> None:
    """Under cgroup v1: the calling thread alone, not its process, into ``group``."""
    fd = os.open(group / "tasks", os.O_WRONLY)
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)


def _can_step_back(homes: list[Path]) -> bool:
    """Whether this thread may move itself into the groups it is in: the way
    back out of an invocation's groups."""
    try:
        for home in homes:
            _move_this_thread(home)
    except OSError:
        return False
    return True


# When each parent was last swept: a leftover is only removed once it is a
# minute old, so looking more often than that at every spawn gains nothing.
_swept: dict[Path, float] = {}
_SWEEP_EVERY_S = 30.0


def _sweep(parent: Path) -> None:
    """Remove empty leftovers of runtimes that were killed before cleaning up
    (rmdir refuses a cgroup that still has members)."""
    now = time.time()
    if now - _swept.get(parent, 0.0) < _SWEEP_EVERY_S:
        return
    _swept[parent] = now
    try:
        entries = list(parent.glob(_PREFIX + "*"))
    except OSError:
        return
    for d in entries:
        try:
            # A young one may belong to a spawn that has not attached yet.
            if now - d.stat().st_mtime < 60:
                continue
            d.rmdir()
        except OSError:
            pass


def _counter(path: Path, key: str) -> int:
    """A ``key value`` line of a flat-keyed cgroup file (memory.events, oom_control)."""
    try:
        for line in _read(path).splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        pass
    return 0


class InvocationCgroup:
    """The groups of one invocation: pids and memory, in as many hierarchies
    as they live in (one under v2, up to two under v1).

    ``memory`` is False when no memory controller could be used; the caller
    then watches memory some other way.
    """

    def __init__(self, max_pids: int, memory_bytes: int):
        p = placement()
        if p.pids is None and p.memory is None:
            raise OSError(p.pids_error)
        self.memory_mechanism = p.memory_mechanism
        self.max_pids = max_pids
        self.memory_bytes = memory_bytes
        self.dirs: list[Path] = []
        self.pids_dir: Path | None = None
        self.memory_dir: Path | None = None
        self.thread_moves = p.thread_moves
        self._homes = [d for d in dict.fromkeys((p.pids, p.memory)) if d is not None]
        name = _PREFIX + uuid.uuid4().hex
        try:
            for parent in dict.fromkeys(d for d in (p.pids, p.memory) if d is not None):
                _sweep(parent)
                d = parent / name
                d.mkdir()
                self.dirs.append(d)
                if parent == p.pids:
                    _write(d / "pids.max", str(max_pids))
                    self.pids_dir = d
                if parent == p.memory:
                    self._limit_memory(d, p.memory_v2)
                    self.memory_dir = d
        except OSError:
            self._remove()
            raise
        self._procs = [str(d / "cgroup.procs") for d in self.dirs]

    def _limit_memory(self, d: Path, v2: bool) -> None:
        limit = str(self.memory_bytes)
        if v2:
            _write(d / "memory.max", limit)
            # Swap would let the tree hold more than the cap; a whole-group
            # kill leaves no half-dead invocation behind.
            for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                _write_if_there(d / name, value)
        else:
            _write(d / "memory.limit_in_bytes", limit)
            _write_if_there(d / "memory.memsw.limit_in_bytes", limit)

    @property
    def caps_pids(self) -> bool:
        return self.pids_dir is not None

    @property
    def caps_memory(self) -> bool:
        return self.memory_dir is not None

    def enter_this_thread(self) -> None:
        """Move the calling thread, not its process, into this invocation's
        groups, so that what it spawns next is born there. Raises OSError
        (the thread may then be in some of them: call ``leave_this_thread``)."""
        if not self.thread_moves:
            raise OSError("a thread cannot move itself between cgroups here")
        for d in self.dirs:
            _move_this_thread(d)

    def leave_this_thread(self) -> None:
        """Move the calling thread back where the runtime lives."""
        for home in self._homes:
            _move_this_thread(home)

    def attach_self(self) -> None:
        """For preexec_fn: only raw os calls, it runs between fork and exec."""
        for procs in self._procs:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # 0 means "the writing process"
            finally:
                os.close(fd)

    def attach(self, pid: int) -> None:
        """Move ``pid`` (not its existing children: v1) into every group."""
        for procs in self._procs:
            _write(procs, str(pid))

    def pids(self) -> list[int]:
        found: set[int] = set()
        for procs in self._procs:
            try:
                found.update(int(x) for x in _read(procs).split())
            except OSError:
                pass
        # A thread of the runtime that could not step back out makes the
        # runtime a member; it is never one of the processes to kill.
        found.discard(os.getpid())
        return sorted(found)

    def memory_exceeded(self) -> bool:
        """The kernel hit the memory cap and killed (or, v1, froze) a member."""
        d = self.memory_dir
        if d is None:
            return False
        if self.memory_mechanism == "cgroup-v2":
            return _counter(d / "memory.events", "oom_kill") > 0 or _counter(d / "memory.events", "oom_group_kill") > 0
        oom = d / "memory.oom_control"
        return _counter(oom, "oom_kill") > 0 or _counter(oom, "under_oom") > 0

    def memory_peak(self) -> int | None:
        d = self.memory_dir
        if d is None:
            return None
        name = "memory.peak" if self.memory_mechanism == "cgroup-v2" else "memory.max_usage_in_bytes"
        try:
            return int(_read(d / name).split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill_members(self, rounds: int = 64) -> None:
        """SIGKILL every member, without waiting for any to go. A killed
        process runs no more code and forks no more (a fork under way when the
        kill lands is abandoned), so a round that finds no member not yet
        killed is the last. ``kill_all`` then waits them out."""
        killed: set[int] = set()
        for _ in range(rounds):
            fresh = [pid for pid in self.pids() if pid not in killed]
            if not fresh:
                return
            for pid in fresh:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            killed.update(fresh)

    def kill_all(self, deadline_s: float = 2.0) -> bool:
        """SIGKILL every member until none is left; True when empty."""
        end = time.monotonic() + deadline_s
        # Killed processes usually leave within a millisecond: look again
        # soon, then less and less often.
        pause = 0.0005
        while True:
            members = self.pids()
            if not members:
                return True
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > end:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def _remove(self) -> None:
        for d in self.dirs:
            for _ in range(200):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)  # members still exiting

    def close(self) -> None:
        self.kill_all()
        self._remove()


class _Spare:
    """The next invocation's groups, made ahead of time off its path (by the
    runtime's finisher thread, after a sandbox is torn down): making them
    (a directory per hierarchy and the caps written) is a third of a
    millisecond a call would otherwise wait for. Only a spare with the caps
    asked for is taken, and only a young one: another runtime's sweep removes
    empty groups a minute old."""

    LIFETIME_S = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: tuple[tuple[int, int, Placement], float, InvocationCgroup] | None = None

    def take(self, max_pids: int, memory_bytes: int) -> InvocationCgroup | None:
        with self._lock:
            held, self._held = self._held, None
        if held is None:
            return None
        caps, made_at, cg = held
        fresh = time.monotonic() - made_at < self.LIFETIME_S
        if caps == (max_pids, memory_bytes, placement()) and fresh and all(os.path.isdir(d) for d in cg.dirs):
            return cg
        cg.close()
        return None

    def make(self, max_pids: int, memory_bytes: int) -> None:
        with self._lock:
            if self._held is not None:
                return
        try:
            cg = InvocationCgroup(max_pids, memory_bytes)
        except OSError:
            return
        with self._lock:
            if self._held is None:
                self._held = ((max_pids, memory_bytes, placement()), time.monotonic(), cg)
                return
        cg.close()

    def dirs(self) -> list[Path]:
        with self._lock:
            return list(self._held[2].dirs) if self._held else []

    def drop(self) -> None:
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            held[2].close()


_spare = _Spare()
atexit.register(_spare.drop)


def for_invocation(max_pids: int, memory_bytes: int) -> InvocationCgroup:
    """An invocation's groups with these caps: the spare when it fits, else
    new ones. Raises OSError where no group can be made."""
    return _spare.take(max_pids, memory_bytes) or InvocationCgroup(max_pids, memory_bytes)


def make_spare(max_pids: int, memory_bytes: int) -> None:
    """Make the next invocation's groups now (nothing when they cannot be made)."""
    _spare.make(max_pids, memory_bytes)


def spare_dirs() -> list[Path]:
    """The spare's groups, if one is held: what a look for leftover groups
    must not count."""
    return _spare.dirs()
