"""A projection is a pure fold over the log plus a view that remembers how far it read.

``Fold`` is the pure part: an initial state and how one event changes it; no
I/O, no clock. ``MaterialisedView`` keeps the folded state in the views store
together with the notification id it has read up to, both written in one
transaction, so a view is never ahead of or behind what it says it has read.
Deleting a view and folding again from the start must give the same bytes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime
from functools import cached_property, partial
from typing import Any

import orjson
from eventsourcing.persistence import Tracking
from eventsourcing.utils import get_topic

from projections.store import ViewStore

UPSTREAM = "metnos"


Handler = Callable[[dict[str, Any], Any, int], Any]


class Fold(ABC):
    """A fold is a table: for each event class it reads, how that event changes the state.

    Rebuilds bind the table once per topic and call the handlers directly, so
    an event costs one dictionary lookup, not a chain of type tests.
    """

    name: str
    # Bump when the fold's code changes what it produces: the view is then
    # rebuilt from the log at start-up.
    version: int = 1
    # Work per log event relative to other folds (events read, lines written),
    # so that a parallel rebuild gives its workers even shares.
    cost: int = 1

    @abstractmethod
    def initial(self) -> dict[str, Any]:
        """The state before any event."""

    @abstractmethod
    def handlers(self) -> dict[type, Handler]:
        """Event class -> ``handler(state, event, position)``, which changes ``state`` in place
        (pure: no I/O, no clock). Events of other classes are skipped before decoding."""

    @cached_property
    def table(self) -> dict[type, Handler]:
        return self.handlers()

    @property
    def events(self) -> tuple[type, ...]:
        return tuple(self.table)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(get_topic(cls) for cls in self.table)

    def handler_for_topic(self) -> dict[str, Handler]:
        return {get_topic(cls): handler for cls, handler in self.table.items()}

    def apply(self, state: dict[str, Any], event: Any, position: int) -> Any:
        """Fold one event into ``state``; returns what its handler returns."""
        handler = self.table.get(type(event))
        return None if handler is None else handler(state, event, position)


_last_key: tuple[Any, str] = (None, "")


def key_of(originator_id: Any) -> str:
    """An aggregate id as a state key.

    A scan hands the folds the same id object for an aggregate's events side
    by side, so the key made last is remembered by identity: hashing a UUID
    runs Python code, and a rebuild asks millions of times.
    """
    global _last_key
    last = _last_key
    if last[0] is originator_id:
        return last[1]
    key = str(originator_id)
    _last_key = (originator_id, key)
    return key


def iso(moment: datetime) -> str:
    """``moment.isoformat()`` for the event timestamps folds keep, at a third of the cost.

    orjson writes a datetime in the same text (tested: aware with whole-minute
    offsets, naive, with and without microseconds), and a rebuild formats
    millions of them.
    """
    return orjson.dumps(moment)[1:-1].decode()


def encode_state(state: dict[str, Any]) -> bytes:
    return orjson.dumps(state, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


class MaterialisedView:
    def __init__(self, fold: Fold, store: ViewStore) -> None:
        self.fold = fold
        self.store = store

    @property
    def position(self) -> int:
        return self.store.max_tracking_id(UPSTREAM) or 0

    def state(self) -> dict[str, Any]:
        raw = self.store.get_state(self.fold.name)
        return self.fold.initial() if raw is None else orjson.loads(raw)

    def state_bytes(self) -> bytes:
        return self.store.get_state(self.fold.name) or encode_state(self.fold.initial())

    def is_stale(self) -> bool:
        stored = self.store.get_version(self.fold.name)
        return stored is not None and stored != self.fold.version

    def catch_up(self, log: Any, *, progress: Any = None) -> dict[str, Any]:
        """Fold whatever the log holds past our position; returns the state."""
        if self.is_stale():
            self.store.reset(self.fold.name)
        fold_pass = self.begin()
        # The head is read first: what lands during the scan is folded too,
        # and nothing before the head can be skipped.
        head = log.recorder.max_notification_id() or 0
        for nid, event in log.domain_events(fold_pass.last + 1, topics=self.fold.topics):
            fold_pass.feed(nid, event)
            if progress is not None:
                progress(nid)
        return fold_pass.finish(head)

    def begin(self) -> FoldPass:
        """A pass over the log from where this view stands."""
        return FoldPass(self, self.state(), self.position)

    def reset(self) -> None:
        self.store.reset(self.fold.name)

    def rebuild(self, log: Any, *, progress: Any = None) -> dict[str, Any]:
        self.reset()
        return self.catch_up(log, progress=progress)


class FoldPass:
    """One pass of a fold over part of the log, saved with its position at the end."""

    def __init__(self, view: MaterialisedView, state: dict[str, Any], last: int) -> None:
        self.view = view
        self.state = state
        self.last = last
        self.seen = last
        self.topics = frozenset(view.fold.topics)

    def feed(self, nid: int, event: Any) -> None:
        self.view.fold.apply(self.state, event, nid)
        self.seen = nid

    def feeders(self) -> dict[str, Callable[[Any, int], Any]]:
        """topic -> ``feed(event, position)`` bound to this pass's state, for scans that
        dispatch by topic themselves (they pass the last position to ``finish``)."""
        return {topic: partial(handler, self.state) for topic, handler in self.view.fold.handler_for_topic().items()}

    def finish(self, head: int) -> dict[str, Any]:
        # The position moves to the head even when the last events were of no
        # interest to this fold, so the next catch-up starts there.
        seen = max(self.seen, head)
        if seen > self.last:
            fold = self.view.fold
            self.view.store.put_state(fold.name, fold.version, encode_state(self.state), Tracking(UPSTREAM, seen))
        return self.state
