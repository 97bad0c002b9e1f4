"""Rebuilding read models: empty a projection and fold it again from the log.

A view whose fold version changed is rebuilt by itself when it next catches
up (projections/base.py); this is the explicit, whole-log version, for
upgrades and for checking that a live view equals its rebuild.

One scan of the log feeds every fold being rebuilt. On a big LMDB log the
folds are shared out among worker processes, one scan each: LMDB serves many
readers at once, the folds are independent, and the decoding and folding
that dominate a rebuild then run on every core instead of one.
"""

from __future__ import annotations

import gc
import os
import selectors
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from domain.errors import MetnosError
from metnos.mechanisms.store.lmdb import LMDBApplicationRecorder
from metnos.settings.workspace import Workspace
from projections.base import fields_of

Progress = Callable[[str, int, int], None]

# Below this many events, starting worker processes (about half a second
# each, mostly imports) costs more than sharing the folds saves.
PARALLEL_FROM = 200_000


class UnknownProjection(MetnosError):
    """No projection by that name."""


class RebuildFailed(MetnosError):
    """A rebuild worker stopped before its folds were done."""


def rebuild(runtime: Any, names: list[str] | None = None, *, progress: Progress | None = None, workers: int | None = None) -> dict[str, int]:
    """Rebuild the named projections (all when ``names`` is empty); returns name -> bytes of the rebuilt view.

    ``workers`` is how many processes fold (default: one per core on a big
    LMDB log, else one, this process).
    """
    views = runtime.projections()
    chosen = names or sorted(views)
    unknown = [n for n in chosen if n not in views]
    if unknown:
        raise UnknownProjection(f"no projection named {', '.join(unknown)}; projections: {', '.join(sorted(views))}")
    with ExitStack() as held:
        # No other process folds these views while they are emptied and refilled
        # (its catch-up waits, then finds them whole); the workers fold for us.
        for name in chosen:
            held.enter_context(views[name].store.folding())
        for name in chosen:
            views[name].reset()
        head = runtime.log.recorder.max_notification_id() or 0
        if workers is None:
            workers = default_workers(runtime.log, head)
        groups = share_out({name: views[name].fold.cost for name in chosen}, workers)
        if len(groups) > 1:
            _fold_with_workers(runtime, views, groups, head, progress)
        else:
            fold_from_log(runtime.log, {name: views[name] for name in chosen}, head, progress=progress)
        return {name: len(views[name].state_bytes()) for name in chosen}


def default_workers(log: Any, head: int) -> int:
    # Other processes can open an LMDB log by its path; an in-memory log or a
    # server's is left to this process.
    if head < PARALLEL_FROM or not isinstance(log.recorder, LMDBApplicationRecorder):
        return 1
    return len(os.sched_getaffinity(0))


def share_out(costs: dict[str, int], workers: int) -> list[list[str]]:
    """The folds in at most ``workers`` groups of even cost, heaviest group first.

    Costliest fold first, each to the lightest group. The calling process
    takes the first group: a worker starts half a second late.
    """
    groups: list[list[str]] = [[] for _ in range(max(1, min(workers, len(costs))))]
    loads = [0] * len(groups)
    for name in sorted(costs, key=lambda n: (-costs[n], n)):
        # Of equally light groups, the one with fewer folds: folds that cost
        # next to nothing still spread out.
        lightest = min(range(len(groups)), key=lambda i: (loads[i], len(groups[i])))
        groups[lightest].append(name)
        loads[lightest] += costs[name]
    shares = sorted(zip(loads, groups, strict=True), key=lambda share: (-share[0], sorted(share[1])))
    return [sorted(group) for _, group in shares if group]


def fold_from_log(log: Any, views: dict[str, Any], head: int, *, progress: Progress | None = None) -> None:
    """Fold the whole log into ``views`` (already reset) in one scan, and save each with its position."""
    passes = [view.begin() for view in views.values()]
    # Each record goes straight to the handlers that read its topic; an event
    # no fold reads is never decoded.
    feeders: dict[str, list[Any]] = {}
    for p in passes:
        for topic, feed in p.feeders().items():
            feeders.setdefault(topic, []).append(feed)
    label = "+".join(views)
    try:
        with _collector_paused():
            last = log.feed(
                feeders, fields=fields_of(p.fold for p in passes),
                progress=None if progress is None else lambda position: progress(label, position, head),
            )
    finally:
        for p in passes:
            close = getattr(p, "close", None)
            if close is not None:
                close()
    # Events that landed during the scan were folded too: the views stand past them.
    for p in passes:
        p.finish(max(head, last or 0))
    if progress is not None:
        progress(label, head, head)


@contextmanager
def _collector_paused() -> Iterator[None]:
    # A rebuild makes millions of short-lived, acyclic objects while its states
    # grow; the cyclic collector would walk that growing heap again and again.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _fold_with_workers(runtime: Any, views: dict[str, Any], groups: list[list[str]], head: int, progress: Progress | None) -> None:
    """This process folds the first (heaviest) share while workers fold the others."""
    own, *others = groups
    label = "+".join(name for group in groups for name in group)
    workers = Workers(runtime.workspace, others, head)
    try:
        def on_progress(_label: str, position: int, _head: int) -> None:
            report = None if progress is None else lambda: progress(label, min(position, *workers.positions), head)
            workers.poll(on_move=report)
            if report is not None:
                report()

        fold_from_log(runtime.log, {name: views[name] for name in own}, head, progress=on_progress)
        workers.wait(lambda position: progress(label, position, head) if progress is not None else None)
    finally:
        workers.kill()
    workers.raise_for_failures()
    if progress is not None:
        progress(label, head, head)


class Workers:
    """Worker processes running ``replay.rebuild_worker``, one per share of the folds.

    They are fresh interpreters that share nothing with this process but the
    files, and import the same code (this process's ``sys.path``). Each writes
    its position on a line of stdout as it goes; a failure is a non-zero exit
    with the reason on stderr.
    """

    def __init__(self, workspace: Workspace, groups: list[list[str]], head: int) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.groups = groups
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-m", "replay.rebuild_worker", str(workspace.data_dir), str(workspace.config_dir), str(head), *group],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            )
            for group in groups
        ]
        self.positions = [0] * len(groups)
        self._partial = [b""] * len(groups)
        self._stderr = [b""] * len(groups)
        self._selector = selectors.DefaultSelector()
        for index, process in enumerate(self.processes):
            self._selector.register(process.stdout, selectors.EVENT_READ, (index, "out"))
            self._selector.register(process.stderr, selectors.EVENT_READ, (index, "err"))
        self._open = 2 * len(groups)

    def poll(self, timeout: float = 0, on_move: Callable[[], Any] | None = None) -> None:
        """Read what the workers have written, waiting at most ``timeout`` seconds.

        ``on_move()`` after each position read, in order: several lines read at
        once are still several steps of the bar, not a jump to the last.
        """
        if not self._open:
            return
        for key, _ in self._selector.select(timeout):
            index, stream = key.data
            chunk = os.read(key.fd, 65536)
            if not chunk:
                self._selector.unregister(key.fileobj)
                self._open -= 1
            elif stream == "err":
                self._stderr[index] = (self._stderr[index] + chunk)[-4096:]
            else:
                # A read may end inside a line: its start waits for the rest.
                *lines, self._partial[index] = (self._partial[index] + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        self.positions[index] = int(line)
                        if on_move is not None:
                            on_move()

    def wait(self, report: Callable[[int], Any]) -> None:
        """Until every worker has closed its output, reporting the slowest one's position."""
        def slowest() -> None:
            report(min(self.positions))

        while self._open:
            self.poll(timeout=0.1, on_move=slowest)
            slowest()
        for process in self.processes:
            process.wait()

    def kill(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
        self._selector.close()
        for process in self.processes:
            process.stdout.close()
            process.stderr.close()

    def raise_for_failures(self) -> None:
        for group, process, stderr in zip(self.groups, self.processes, self._stderr, strict=True):
            code = process.returncode
            if code:
                why = f"was killed by signal {-code}" if code < 0 else f"failed: {_last_line(stderr)}"
                msg = f"the rebuild worker for {', '.join(group)} {why}; those views are empty until `metnos rebuild` runs again"
                raise RebuildFailed(msg)


def _last_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no message"

