"""Folds whose output is lines in one JSONL file a day (audit lines, turn lines).

Lines are only ever appended; the sizes the files had at the last recorded
position are kept with that position, so after a crash between appending and
recording, the next catch-up first cuts the files back and nothing is written
twice. Rebuilding deletes the files and folds again: the bytes are the same.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from eventsourcing.persistence import Tracking

from metnos.mechanisms.store.errors import LogUnavailable
from metnos.mechanisms.store.event_record import Record
from projections.base import UPSTREAM, Fold, Handler, encode_state
from metnos.mechanisms.store.views import ViewStore


_LINE = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE

# What a lines fold's handler returns: the (day, line) pairs the event completes, if any.
Lines = list[tuple[str, dict[str, Any]]] | None


class LinesFold(Fold):
    """A fold whose handlers, besides changing the state, return the lines an event completes."""


class DailyLines:
    def __init__(self, directory: Path, store: ViewStore, fold: LinesFold) -> None:
        self.dir = directory
        self.store = store
        self.fold = fold

    def _state(self) -> dict[str, Any]:
        raw = self.store.get_state(self.fold.name)
        if raw is None or self.store.get_version(self.fold.name) != self.fold.version:
            return {**self.fold.initial(), "sizes": {}}
        return orjson.loads(raw)

    def catch_up(self, log: Any, *, progress: Any = None) -> int:
        with self.store.folding():
            if self.store.get_version(self.fold.name) not in (None, self.fold.version):
                self.reset()
            try:
                return self._catch_up(log, progress=progress)
            except LogUnavailable:
                return 0  # a full disk: the position was not moved, the next catch-up cuts back and folds again
            except OSError as e:
                if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                return 0

    def _catch_up(self, log: Any, *, progress: Any = None) -> int:
        lines_pass = self.begin()
        head = log.recorder.max_notification_id() or 0
        try:
            for batch in log.record_batches(lines_pass.last + 1, fields=self.fold.fields):
                for nid, topic, record in batch:
                    lines_pass.feed(nid, topic, record)
                if batch and progress is not None:
                    progress(batch[-1][0])
        finally:
            lines_pass.close()
        lines_pass.finish(head)
        return lines_pass.written

    def begin(self) -> LinesPass:
        state = self._state()
        self._cut_back(state["sizes"])
        self.dir.mkdir(parents=True, exist_ok=True)
        return LinesPass(self, state, self.store.max_tracking_id(UPSTREAM) or 0)

    def reset(self) -> None:
        self.store.reset(self.fold.name)
        if self.dir.exists():
            for path in self.dir.glob("*.jsonl"):
                path.unlink()

    def _cut_back(self, sizes: dict[str, int]) -> None:
        if not self.dir.exists():
            return
        for path in self.dir.glob("*.jsonl"):
            recorded = sizes.get(path.stem, 0)
            if path.stat().st_size > recorded:
                with open(path, "r+b") as f:
                    f.truncate(recorded)

    def rebuild(self, log: Any, *, progress: Any = None) -> int:
        with self.store.folding():
            self.reset()
            return self._catch_up(log, progress=progress)

    def state_bytes(self) -> bytes:
        """The view as bytes: its files, in name order, with their names."""
        if not self.dir.exists():
            return b""
        return b"".join(p.name.encode() + b"\0" + p.read_bytes() for p in sorted(self.dir.glob("*.jsonl")))


class LinesPass:
    """One pass of a lines fold: appends to the day files, then records its position."""

    def __init__(self, owner: DailyLines, state: dict[str, Any], last: int) -> None:
        self.owner = owner
        self.fold = owner.fold
        self.state = state
        self.last = last
        self.written = 0
        self._handles: dict[str, Any] = {}

    def feed(self, nid: int, topic: str, record: Record) -> None:
        lines = self.owner.fold.apply_record(self.state, topic, record, nid)
        if lines:
            self._write(lines)

    def feeders(self) -> dict[str, Callable[[Record, int], None]]:
        """topic -> ``feed(record, position)``, as ``FoldPass.feeders``."""
        return {topic: self._feeder(handler) for topic, handler in self.owner.fold.by_topic.items()}

    def _feeder(self, handler: Handler) -> Callable[[Record, int], None]:
        state = self.state
        write = self._write

        def feed(record: Record, position: int) -> None:
            lines = handler(state, record, position)
            if lines:
                write(lines)

        return feed

    def _write(self, lines: list[tuple[str, dict[str, Any]]]) -> None:
        for day, line in lines:
            handle = self._handles.get(day)
            if handle is None:
                handle = self._handles[day] = open(self.owner.dir / f"{day}.jsonl", "ab")  # noqa: SIM115
            handle.write(orjson.dumps(line, option=_LINE))
            self.written += 1

    def close(self) -> None:
        for day, handle in self._handles.items():
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            self.state["sizes"][day] = (self.owner.dir / f"{day}.jsonl").stat().st_size
        self._handles.clear()

    def finish(self, head: int) -> None:
        self.close()
        if head > self.last:
            fold = self.owner.fold
            self.owner.store.put_state(fold.name, fold.version, encode_state(self.state), Tracking(UPSTREAM, head))
