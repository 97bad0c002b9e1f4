"""The memory cap where no memory cgroup can be used: a watchdog.

It sums the proportional set size (PSS) of every process of the invocation
and reports the cap exceeded once the sum passes it; the caller kills the
tree. PSS rather than RSS: forked children share their parent's pages, and
counting those once per child would kill a tree that holds far less than the
cap. The processes are the members of the invocation's pids cgroup when there
is one (complete even for a child that left the session), otherwise the
descendants of the spawned process.

It is a poll, so the tree can overshoot the cap by what it allocates between
two looks; a memory cgroup is exact and is used whenever it can be.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

PAGE = os.sysconf("SC_PAGE_SIZE")


def process_memory(pid: int) -> int:
    """Bytes the process holds: PSS where the kernel reports it, else RSS."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0  # gone between listing and reading


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


class MemoryWatchdog:
    """Call ``memory_exceeded()`` periodically; True once the tree is past the cap."""

    memory_mechanism = "watchdog"

    def __init__(self, limit_bytes: int, members: Callable[[], Iterable[int]]):
        self.limit_bytes = limit_bytes
        self.members = members
        self.peak = 0
        self.tripped = False

    def memory_exceeded(self) -> bool:
        if not self.tripped:
            total = sum(process_memory(pid) for pid in self.members())
            self.peak = max(self.peak, total)
            self.tripped = total > self.limit_bytes
        return self.tripped

    def memory_peak(self) -> int | None:
        return self.peak
