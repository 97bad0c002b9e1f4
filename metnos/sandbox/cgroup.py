"""A pids cgroup per invocation: the process cap that works for root.

RLIMIT_NPROC is skipped by the kernel for the real root user, so a fork bomb
is stopped by ``pids.max`` instead. The same files (``pids.max``,
``cgroup.procs``) exist in cgroup v1 and v2; we look for a pids hierarchy
we can create children in, and report none when there is not one.

Joining has to happen before bwrap forks (v1 moves a process, not its
descendants), hence ``attach_self`` for use between fork and exec. The
cgroup is also how everything is killed at the end: its member list is
complete even for processes that left the process group.
"""

from __future__ import annotations

import functools
import os
import signal
import time
import uuid
from pathlib import Path


def _pids_mounts() -> list[tuple[Path, bool]]:
    """(mount point, is_v2) of the hierarchies that may carry the pids controller."""
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
        if rfields[0] == "cgroup" and "pids" in rfields[2].split(","):
            out.append((Path(fields[4]), False))
        elif rfields[0] == "cgroup2":
            ctrl = Path(fields[4]) / "cgroup.controllers"
            try:
                if "pids" in ctrl.read_text().split():
                    out.append((Path(fields[4]), True))
            except OSError:
                pass
    return out


def _own_path(is_v2: bool) -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, ctrls, path = line.split(":", 2)
        if (is_v2 and hid == "0") or (not is_v2 and "pids" in ctrls.split(",")):
            return path.lstrip("/")
    return ""


@functools.lru_cache(maxsize=1)
def pids_parent() -> tuple[Path | None, str | None]:
    """Where invocation cgroups are made, or (None, why not)."""
    errors = []
    for mount, is_v2 in _pids_mounts():
        base = mount / _own_path(is_v2) / "metnos"
        try:
            base.mkdir(exist_ok=True)
            if is_v2:
                (base / "cgroup.subtree_control").write_text("+pids")
            probe = base / f"probe-{uuid.uuid4().hex[:8]}"
            probe.mkdir()
            try:
                (probe / "pids.max").write_text("1")
            finally:
                probe.rmdir()
            return base, None
        except OSError as e:
            errors.append(f"{base}: {e.strerror or e}")
    return None, "; ".join(errors) or "no pids cgroup hierarchy mounted"


def _sweep(base: Path) -> None:
    """Remove empty leftovers of runtimes that were killed before cleaning up
    (rmdir refuses a cgroup that still has members)."""
    try:
        entries = list(base.glob("inv-*"))
    except OSError:
        return
    now = time.time()
    for d in entries:
        try:
            # A young one may belong to a spawn that has not attached yet.
            if now - d.stat().st_mtime < 60:
                continue
            d.rmdir()
        except OSError:
            pass


class PidsCgroup:
    def __init__(self, max_pids: int):
        base, why = pids_parent()
        if base is None:
            raise OSError(why)
        _sweep(base)
        self.path = base / f"inv-{uuid.uuid4().hex}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(max_pids))
        except OSError:
            self.path.rmdir()
            raise
        self._procs = str(self.path / "cgroup.procs")

    def attach_self(self) -> None:
        """For preexec_fn: only raw os calls, it runs between fork and exec."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")  # 0 means "the writing process"
        finally:
            os.close(fd)

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in Path(self._procs).read_text().split()]
        except OSError:
            return []

    def kill_all(self, deadline_s: float = 2.0) -> bool:
        """SIGKILL every member until none is left; True when empty."""
        end = time.monotonic() + deadline_s
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
            time.sleep(0.005)

    def close(self) -> None:
        self.kill_all()
        for _ in range(200):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.005)  # members still exiting
