"""A projection is a pure fold over the log plus a view that remembers how far it read.

``Fold`` is the pure part: an initial state and how one event changes it; no
I/O, no clock. ``MaterialisedView`` keeps the folded state in the views store
together with the notification id it has read up to, both written in one
transaction, so a view is never ahead of or behind what it says it has read.
Deleting a view and folding again from the start must give the same bytes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from functools import cached_property, partial
from typing import Any, TypeVar

import orjson
from eventsourcing.persistence import Tracking
from eventsourcing.utils import get_topic

from metnos.mechanisms.store.errors import LogUnavailable
from metnos.mechanisms.store.event_record import Record, record_of
from metnos.mechanisms.store.views import UPSTREAM, ViewStore



# ``handler(state, record, position)``: a record is the event's fields in a
# dict (metnos/mechanisms/store/event_record.py), read without building the event.
Handler = Callable[[dict[str, Any], Record, int], Any]
H = TypeVar("H", bound=Handler)


def reads(*fields: str) -> Callable[[H], H]:
    """Declare the fields a handler reads, besides ``originator_id``, ``originator_version``
    and ``timestamp``, which every record has.

    Its records may then hold those fields alone: a rebuild decodes nothing
    else. A handler without a declaration gets every field.
    """

    def declare(handler: H) -> H:
        handler.reads = frozenset(fields)  # type: ignore[attr-defined]
        return handler

    return declare


def fields_read(handler: Handler) -> frozenset[str] | None:
    """The fields ``handler`` declared with ``reads``; None: all of them."""
    return getattr(handler, "reads", None)


class Fold(ABC):
    """A fold is a table: for each event class it reads, how that event changes the state.

    Handlers read records, not event objects: a rebuild decodes millions of
    events, and a record is what the stored bytes give at once. Rebuilds bind
    the table once per topic and call the handlers directly, so an event costs
    one dictionary lookup, not a chain of type tests.
    """

    name: str
    # Bump when the fold's code changes what it produces: the view is then
    # rebuilt from the log at start-up.
    version: int = 1
    # Work per log event relative to other folds, so that a parallel rebuild
    # gives its workers even shares: measured folding one at a time over the
    # rebuild benchmark's log. Folds of rare events (executors, mnests,
    # schedules) cost next to nothing beside a turn's.
    cost: int = 0

    @abstractmethod
    def initial(self) -> dict[str, Any]:
        """The state before any event."""

    @abstractmethod
    def handlers(self) -> dict[type, Handler]:
        """Event class -> ``handler(state, record, position)``, which changes ``state`` in place
        (pure: no I/O, no clock). Events of other classes are skipped before decoding."""

    @cached_property
    def table(self) -> dict[type, Handler]:
        return self.handlers()

    @cached_property
    def by_topic(self) -> dict[str, Handler]:
        return {get_topic(cls): handler for cls, handler in self.table.items()}

    @cached_property
    def fields(self) -> dict[str, frozenset[str] | None]:
        """topic -> the fields its handler reads (None: all)."""
        return {topic: fields_read(handler) for topic, handler in self.by_topic.items()}

    @property
    def events(self) -> tuple[type, ...]:
        return tuple(self.table)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(self.by_topic)

    def apply(self, state: dict[str, Any], event: Any, position: int) -> Any:
        """Fold one domain event object into ``state``; returns what its handler returns."""
        handler = self.table.get(type(event))
        return None if handler is None else handler(state, record_of(event), position)

    def apply_record(self, state: dict[str, Any], topic: str, record: Record, position: int) -> Any:
        """Fold one record of the given topic into ``state``; returns what its handler returns."""
        handler = self.by_topic.get(topic)
        return None if handler is None else handler(state, record, position)


def fields_of(folds: Iterable[Fold]) -> dict[str, frozenset[str] | None]:
    """topic -> the fields any of ``folds`` reads of it (None: all), for one scan feeding them all."""
    merged: dict[str, frozenset[str] | None] = {}
    for fold in folds:
        for topic, wanted in fold.fields.items():
            if topic not in merged:
                merged[topic] = wanted
            else:
                before = merged[topic]
                merged[topic] = None if before is None or wanted is None else before | wanted
    return merged


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
        with self.store.folding():
            return self._catch_up(log, progress=progress)

    def _catch_up(self, log: Any, *, progress: Any = None) -> dict[str, Any]:
        if self.is_stale():
            self.store.reset(self.fold.name)
        fold_pass = self.begin()
        # The head is read first: what lands during the scan is folded too,
        # and nothing before the head can be skipped.
        head = log.recorder.max_notification_id() or 0
        for batch in log.record_batches(fold_pass.last + 1, fields=self.fold.fields):
            for nid, topic, record in batch:
                fold_pass.feed(nid, topic, record)
            if batch and progress is not None:
                progress(batch[-1][0])
        return fold_pass.finish(head)

    def begin(self) -> FoldPass:
        """A pass over the log from where this view stands."""
        return FoldPass(self, self.state(), self.position)

    def reset(self) -> None:
        self.store.reset(self.fold.name)

    def rebuild(self, log: Any, *, progress: Any = None) -> dict[str, Any]:
        with self.store.folding():
            self.reset()
            return self._catch_up(log, progress=progress)


class FoldPass:
    """One pass of a fold over part of the log, saved with its position at the end."""

    def __init__(self, view: MaterialisedView, state: dict[str, Any], last: int) -> None:
        self.view = view
        self.fold = view.fold
        self.state = state
        self.last = last
        self.seen = last

    def feed(self, nid: int, topic: str, record: Record) -> None:
        self.view.fold.apply_record(self.state, topic, record, nid)
        self.seen = nid

    def feeders(self) -> dict[str, Callable[[Record, int], Any]]:
        """topic -> ``feed(record, position)`` bound to this pass's state, for scans that
        dispatch by topic themselves (they pass the last position to ``finish``)."""
        return {topic: partial(handler, self.state) for topic, handler in self.view.fold.by_topic.items()}

    def finish(self, head: int) -> dict[str, Any]:
        # The position moves to the head even when the last events were of no
        # interest to this fold, so the next catch-up starts there.
        seen = max(self.seen, head)
        if seen > self.last:
            fold = self.view.fold
            try:
                self.view.store.put_state(fold.name, fold.version, encode_state(self.state), Tracking(UPSTREAM, seen))
            except LogUnavailable:
                # A full disk: the state is right in memory for this command;
                # the view stays where it was and catches up once there is room.
                pass
        return self.state
