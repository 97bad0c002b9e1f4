"""A projection is a pure fold over the log plus a view that remembers how far it read.

``Fold`` is the pure part: an initial state and how one event changes it; no
I/O, no clock. ``MaterialisedView`` keeps the folded state in the views store
together with the notification id it has read up to, both written in one
transaction, so a view is never ahead of or behind what it says it has read.
Deleting a view and folding again from the start must give the same bytes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import lru_cache
from typing import Any

import orjson
from eventsourcing.persistence import Tracking
from eventsourcing.utils import get_topic

from projections.store import ViewStore

UPSTREAM = "metnos"


class Fold(ABC):
    name: str
    # Bump when the fold's code changes what it produces: the view is then
    # rebuilt from the log at start-up.
    version: int = 1
    # Event classes the fold reads; others are skipped before decoding.
    events: tuple[type, ...] = ()

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(get_topic(cls) for cls in self.events)

    @abstractmethod
    def initial(self) -> dict[str, Any]:
        """The state before any event."""

    @abstractmethod
    def apply(self, state: dict[str, Any], event: Any, position: int) -> None:
        """Change ``state`` in place for one event (pure: no I/O, no clock)."""


@lru_cache(maxsize=65536)
def key_of(originator_id: Any) -> str:
    """An aggregate id as a state key; folds meet the same ids many times in a row."""
    return str(originator_id)


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

    def finish(self, head: int) -> dict[str, Any]:
        # The position moves to the head even when the last events were of no
        # interest to this fold, so the next catch-up starts there.
        seen = max(self.seen, head)
        if seen > self.last:
            fold = self.view.fold
            self.view.store.put_state(fold.name, fold.version, encode_state(self.state), Tracking(UPSTREAM, seen))
        return self.state
