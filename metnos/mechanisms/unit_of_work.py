"""Events saved together and committed together: a turn's, in one write transaction.

While a unit of work is open in a thread, what that thread saves to the log
is held here instead of written; ``commit`` writes everything held in one
transaction of the recorder (one ``insert_rows`` on LMDB, ``insert_events`` elsewhere), so a kill leaves either
all of it or none. Events are encoded as they are added, while the turn waits on its model, so that
the commit at its end (what the user waits on, and the log's one writer is held for) only writes.
The log commits a unit before any read of it in this process (read-your-writes), so nothing in the
process ever reads past what it saved; other processes see the events when they are committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any


class UnitOfWork:
    def __init__(self, write: Callable[..., Any], encode: Callable[[list[Any]], Any] | None = None) -> None:
        """``write(events, aggregates, rows=...)`` writes in one transaction; ``encode(events)``
        lays out their rows (None: the write encodes them)."""
        self._write = write
        self._encode = encode
        self._events: list[Any] = []
        # What ``encode`` made of the events held, summed with ``+=``.
        self._rows: Any = None
        self._aggregates: dict[Any, Any] = {}
        # Another thread's read may commit this unit while its own thread adds to it.
        self._lock = threading.RLock()
        self.transactions = 0

    def add(self, objs: Iterable[Any]) -> None:
        """Take the pending events of aggregates (or events given as such), as ``save`` would."""
        with self._lock:
            events: list[Any] = []
            aggregates: dict[Any, Any] = {}
            for obj in objs:
                if obj is None:
                    continue
                collect = getattr(obj, "collect_events", None)
                if collect is None:
                    events.append(obj)
                    continue
                events.extend(collect())
                aggregates[obj.id] = obj
            # An event that cannot be encoded fails its own save, as a save outside a unit does;
            # what was added before stays held.
            rows = self._encode(events) if self._encode is not None else None
            self._events.extend(events)
            self._aggregates.update(aggregates)
            if rows is not None:
                if self._rows is None:
                    self._rows = rows
                else:
                    self._rows += rows

    @property
    def pending(self) -> int:
        return len(self._events)

    def commit(self) -> None:
        """Write every event held, in one transaction; nothing held, nothing written.

        A failed write drops what it could not write (as a failed ``save`` does)
        and raises the log's error, which names those events.
        """
        with self._lock:
            if not self._events:
                return
            events, aggregates, rows = self._events, self._aggregates, self._rows
            self._events, self._aggregates, self._rows = [], {}, None
            self._write(events, aggregates, rows=rows)
            self.transactions += 1
