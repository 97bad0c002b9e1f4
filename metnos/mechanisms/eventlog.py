"""The one log every Metnos fact goes into: an eventsourcing Application.

LMDB in the workspace is the default; any of eventsourcing's persistence
modules can be chosen with environment variables alone (PostgreSQL for users
who outgrow one machine: see docs/log.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.persistence import InfrastructureFactoryError, Notification, Recording
from eventsourcing.utils import strtobool

from domain.errors import MetnosError
from metnos.mechanisms.store.event_record import Record, record_of
from metnos.mechanisms.store.mapper import StoredRow, row_of
from metnos.settings.loader import env_section
from metnos.settings.workspace import Workspace
from metnos.mechanisms.store.environment import DATA_FILE
from metnos.mechanisms.store.errors import LogDamaged, LogUnavailable
from metnos.mechanisms.store.shared_lock import shared_lock
from metnos.mechanisms.store.views import UPSTREAM, ViewStore
from metnos.mechanisms.unit_of_work import UnitOfWork

DEFAULT_PERSISTENCE_MODULE = "metnos.mechanisms.store.lmdb"
# The names the store had before the code moved into layers, as a user's environment may still say them.
FORMER_NAMES = {"metnos.store.lmdb": DEFAULT_PERSISTENCE_MODULE, "metnos.store.compressor:ZstdCompressor": "metnos.mechanisms.store.compressor:ZstdCompressor"}
# How long a process waits for another making the PostgreSQL tables (a first start on an empty database).
_TABLES_WAIT_S = 120.0
KNOWN_MODULES = ("metnos.mechanisms.store.lmdb", "eventsourcing.postgres", "eventsourcing.sqlite", "eventsourcing.popo")


class LogConfigError(MetnosError):
    """The environment names a log that cannot be used."""


class EventLog(Application[UUID]):
    name = "metnos"
    is_snapshotting_enabled = False

    def __init__(self, workspace: Workspace | None = None, env: Mapping[str, str] | None = None) -> None:
        self.workspace = workspace or Workspace.from_config(env_section("workspace"))
        settings = _defaults(self.workspace)
        # The settings' store variables win over the defaults, an explicit env over both; eventsourcing reads them.
        settings.update(env_section("log").as_environment())
        settings.update(env or {})
        settings.update({k: FORMER_NAMES[v] for k, v in settings.items() if v in FORMER_NAMES})
        if settings.get("PERSISTENCE_MODULE") == DEFAULT_PERSISTENCE_MODULE:
            _refuse_an_empty_log_with_history(self.workspace, Path(settings.get("LMDB_PATH") or self.workspace.log_dir))
        tables_wanted = _tables_made_here(settings)
        try:
            super().__init__(env=settings)
        except InfrastructureFactoryError as e:
            module = settings.get("PERSISTENCE_MODULE", "")
            msg = f"PERSISTENCE_MODULE={module!r} is not a usable persistence module; use one of: {', '.join(KNOWN_MODULES)}"
            raise LogConfigError(msg) from e
        if tables_wanted:
            # Processes making the tables at once fail all but one ("relation already exists", "tuple
            # concurrently updated" on CREATE OR REPLACE FUNCTION): one at a time across every process of the log.
            with shared_lock(self, "tables", wait_s=_TABLES_WAIT_S):
                self.recorder.create_table()
        # thread id -> the unit of work open in it (unit_of_work)
        self._units: dict[int, UnitOfWork] = {}
        self._units_lock = threading.Lock()
        # Every read of the recorder's (the repository's, a projection's, a scan) sees what this process saved.
        for name in _READS:
            read = getattr(self.recorder, name, None)
            if read is not None:
                setattr(self.recorder, name, self._reads_after_commit(read))

    def save(self, *objs: Any, **kwargs: Any) -> Any:
        """Save as eventsourcing does; a write that fails says which events it did not write.

        Inside a unit of work of this thread (``unit_of_work``) the events are
        held and written with the unit's others, in one transaction.
        """
        unit = self._units.get(threading.get_ident()) if self._units else None
        if unit is not None and not kwargs:
            unit.add(objs)
            return []
        return self._write(*_collected(objs), **kwargs)

    def save_now(self, *objs: Any) -> Any:
        """Write at once, also inside a unit of work of this thread: a fact another process waits
        on (a question asked while the turn holds its own events)."""
        return self._write(*_collected(objs))

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        """Hold what this thread saves until ``commit`` (or the end of the block) writes it in one transaction.

        A read of the log in this process commits every open unit first, so
        that it sees what was saved. A unit opened inside another of the same
        thread is that one. The block's end commits what is held, also when it
        ends with an error: what happened before it is a fact to keep.
        """
        ident = threading.get_ident()
        unit = self._units.get(ident)
        if unit is not None:
            yield unit
            return
        unit = UnitOfWork(self._write, self._encoder())
        with self._units_lock:
            self._units[ident] = unit
        try:
            yield unit
        finally:
            try:
                unit.commit()
            finally:
                with self._units_lock:
                    del self._units[ident]

    def _encoder(self) -> Callable[[list[Any]], Any] | None:
        """Events to what the recorder writes, made before its transaction: rows laid out where the
        recorder lays them out (LMDB), else None (the write encodes them)."""
        lay_out = getattr(self.recorder, "lay_out", None)
        stored_rows = getattr(self.mapper, "stored_rows", None)
        if lay_out is None or stored_rows is None or getattr(self.recorder, "insert_rows", None) is None:
            return None
        return lambda events: lay_out(stored_rows(events))

    def _write(self, events: list[Any], aggregates: dict[Any, Any], *, rows: Any = None, **kwargs: Any) -> list[Any]:
        """``events`` in one insert of the recorder (one transaction), as eventsourcing's save records them;
        ``rows``: theirs, already encoded (``_encoder``)."""
        recorder, mapper = self.recorder, self.mapper
        insert_rows = getattr(recorder, "insert_rows", None)
        stored_rows = getattr(mapper, "stored_rows", None)
        try:
            if insert_rows is not None and stored_rows is not None:
                # No StoredEvent an event: on a turn's save they cost as much as laying out the records.
                if rows is None:
                    rows = stored_rows(events)
                ids = insert_rows(rows, **kwargs)
                # Laid out by a unit of work: the recordings read the rows it holds.
                rows = getattr(rows, "rows", rows)
            else:
                stored = [mapper.to_stored_event(e) for e in events]
                ids = recorder.insert_events(stored, **kwargs)
                rows = [row_of(s) for s in stored]
        except LogUnavailable as e:
            raise LogUnavailable(f"{e}. Not written: {_unwritten(events, aggregates)}. Everything recorded before is in the log") from e
        repository = self.repository
        if repository.cache and not repository.fastforward:
            for aggregate_id, aggregate in aggregates.items():
                repository.cache.put(aggregate_id, aggregate)
        recordings = _Recordings(events, rows, ids or ())
        processing: ProcessingEvent[Any] = ProcessingEvent(kwargs.get("tracking"))
        processing.events, processing.aggregates = events, aggregates
        self._take_snapshots(processing)
        self._notify(recordings)
        self.notify(events)
        return recordings

    def _reads_after_commit(self, read: Callable[..., Any]) -> Callable[..., Any]:
        """``read`` of the recorder, run once every open unit of work has been committed."""

        def commit_then_read(*args: Any, **kwargs: Any) -> Any:
            if self._units:
                self._commit_open_units()
            return read(*args, **kwargs)

        return commit_then_read

    def _commit_open_units(self) -> None:
        with self._units_lock:
            units = list(self._units.values())
        for unit in units:
            unit.commit()

    def notifications(self, start: int = 1, *, topics: tuple[str, ...] = (), batch: int = 1000) -> Iterator[Any]:
        """Every stored notification from ``start`` on, in order."""
        recorder = self.recorder
        position = start
        while True:
            page = recorder.select_notifications(start=position, limit=batch, topics=topics)
            yield from page
            if len(page) < batch:
                return
            position = page[-1].id + 1


    def domain_events(self, start: int = 1, *, topics: tuple[str, ...] = ()) -> Iterator[tuple[int, Any]]:
        """(notification id, domain event) for every event from ``start`` on.

        With ``topics``, other events are skipped before they are decoded.
        """
        wanted = frozenset(topics)
        scan = getattr(self.recorder, "scan_events", None)
        if scan is not None and getattr(self.mapper, "stores_plain_json", False):
            # Chained in C: a generator here would cost a resume an event.
            return chain.from_iterable(scan(self.mapper, start, wanted or None))
        return self._decoded_events(start, wanted)

    def _decoded_events(self, start: int, wanted: frozenset[str]) -> Iterator[tuple[int, Any]]:
        batches = getattr(self.recorder, "scan_batches", None)
        decode_rows = getattr(self.mapper, "decode_rows", None)
        if batches is not None and decode_rows is not None:
            for rows in batches(start, topics=wanted or None):
                for row, event in zip(rows, decode_rows(rows), strict=True):
                    yield row[0], event
            return
        to_domain = self.mapper.to_domain_event
        for n in self.notifications(start, topics=tuple(wanted)):
            yield n.id, to_domain(n)

    def record_batches(
        self, start: int = 1, *, topics: Iterable[str] = (), fields: Mapping[str, frozenset[str] | None] | None = None
    ) -> Iterator[list[tuple[int, str, Record]]]:
        """Lists of ``(notification id, topic, record)`` from ``start`` on: what folds read.

        Only records of ``topics`` (default: all) are read, the others skipped
        before they are decoded. ``fields`` (topic -> fields wanted, None for
        all) names the topics instead and lets a record hold only the fields
        wanted. A list may be empty when none of its stored events matched.
        """
        if fields is not None and not fields:
            return  # no topic wanted, not every topic
        wanted = frozenset(fields) if fields is not None else frozenset(topics)
        decode_records = getattr(self.mapper, "decode_records", None)
        batches = getattr(self.recorder, "scan_batches", None)
        if batches is not None and decode_records is not None:
            loaders = self.mapper.record_loaders(fields) if fields else None
            for rows in batches(start, topics=wanted or None, ids_as_text=True):
                yield decode_records(rows, loaders)
            return
        to_domain = self.mapper.to_domain_event
        page: list[tuple[int, str, Record]] = []
        for n in self.notifications(start, topics=tuple(wanted)):
            page.append((n.id, n.topic, record_of(to_domain(n))))
            if len(page) == _PAGE:
                yield page
                page = []
        if page:
            yield page

    def feed(
        self,
        feeds: Mapping[str, Sequence[Callable[[Record, int], Any]]],
        *,
        fields: Mapping[str, frozenset[str] | None] | None = None,
        start: int = 1,
        progress: Callable[[int], Any] | None = None,
    ) -> int | None:
        """Hand every record of the feeds' topics, from ``start`` on and in log order, to
        each of that topic's feeds as ``feed(record, notification id)``; returns the last id fed.

        ``fields`` (topic -> fields wanted) as for ``record_batches``;
        ``progress(id)`` now and then. On an LMDB log with Metnos's codecs this
        is one loop from the stored bytes to the feeds: the rebuild's.
        """
        if self._units:
            self._commit_open_units()
        feeder = getattr(self.recorder, "feed_records", None)
        if feeder is not None and hasattr(self.mapper, "plain_loader"):
            loaders = self.mapper.record_loaders(fields) if fields else None
            return feeder(self.mapper, feeds, loaders, start, progress=progress)
        last: int | None = None
        for batch in self.record_batches(start, fields=fields if fields is not None else dict.fromkeys(feeds)):
            for nid, topic, record in batch:
                for feed in feeds[topic]:
                    feed(record, nid)
            if batch:
                last = batch[-1][0]
                if progress is not None:
                    progress(last)
        return last

    def records(self, start: int = 1, *, topics: Iterable[str] = ()) -> Iterator[tuple[int, str, Record]]:
        """``(notification id, topic, record)`` for every event of ``topics`` (default: all) from ``start`` on."""
        for batch in self.record_batches(start, topics=topics):
            yield from batch


_PAGE = 1000
# The recorder's methods that read what was recorded (``feed`` commits for its own).
_READS = ("select_events", "select_notifications", "max_notification_id", "scan", "scan_batches", "scan_events")


class _Recordings(Sequence[Recording[Any]]):
    """What ``save`` returns, as eventsourcing's: each recording made when it is read (nothing reads them on the hot path)."""

    def __init__(self, events: list[Any], rows: list[StoredRow], ids: Sequence[int]) -> None:
        self._events, self._rows, self._ids = events, rows, ids

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        originator_id, originator_version, topic, state = self._rows[index]
        notification = Notification(originator_id=originator_id, originator_version=originator_version,
                                    topic=topic, state=state, id=self._ids[index])
        return Recording(domain_event=self._events[index], notification=notification)


def _collected(objs: Iterable[Any]) -> tuple[list[Any], dict[Any, Any]]:
    """The pending events of ``objs`` (aggregates, or events given as such), and the aggregates by id."""
    events: list[Any] = []
    aggregates: dict[Any, Any] = {}
    for obj in objs:
        if obj is None:
            continue
        # Duck-typed: eventsourcing's runtime Protocol checks cost more than the rest of a small save.
        collect = getattr(obj, "collect_events", None)
        if collect is None:
            events.append(obj)
        else:
            events.extend(collect())
            aggregates[obj.id] = obj
    return events, aggregates


def _unwritten(events: list[Any], aggregates: dict[Any, Any]) -> str:
    """``Turn 1a2b3c4d: StepProposed, StepResolved; ...``: the events a failed write did not write, by aggregate."""
    names: dict[Any, list[str]] = {}
    for e in events:
        names.setdefault(e.originator_id, []).append(type(e).__name__)
    parts = []
    for ident, kinds in names.items():
        aggregate = aggregates.get(ident)
        kind = type(aggregate).__name__ if aggregate is not None else "events of"
        parts.append(f"{kind} {str(ident)[:8]}: {', '.join(kinds)}")
    return "; ".join(parts) or "nothing pending"


def _refuse_an_empty_log_with_history(workspace: Workspace, log_path: Path) -> None:
    """An empty log where the views have folded events is a history lost, not a new log.

    LMDB takes an empty data file for a new environment; writing into it
    would bury the evidence, so nothing is opened and the user is told how
    to recover.
    """

    data_file = log_path / DATA_FILE
    if not data_file.exists() or data_file.stat().st_size > 0:
        return
    if not (workspace.views_dir / DATA_FILE).exists() or os.path.realpath(log_path) != os.path.realpath(workspace.log_dir):
        return
    try:
        store = ViewStore.open(workspace.views_dir, "turns")
    except (LogUnavailable, LogDamaged):
        return
    try:
        folded = store.max_tracking_id(UPSTREAM) or 0
    finally:
        store.close()
    if folded:
        msg = (
            f"the log file {data_file} is empty, but this workspace's views have folded {folded} events from it: "
            "the history is gone from that file, and Metnos will not start a new log over it (nothing was written). "
            f"Restore {data_file} from a backup; to start over on purpose, move {workspace.data_dir} aside and run `metnos init`"
        )
        raise LogDamaged(msg)


def _tables_made_here(settings: dict[str, str]) -> bool:
    """Whether the log's PostgreSQL tables are to be made; if so, ``settings`` now tells eventsourcing not to
    make them, for EventLog makes them under a lock every process shares."""
    if settings.get("PERSISTENCE_MODULE") != "eventsourcing.postgres":
        return False
    said = next((where[name] for name in (f"{EventLog.name.upper()}_CREATE_TABLE", "CREATE_TABLE")
                 for where in (settings, os.environ) if name in where), "yes")
    settings["CREATE_TABLE"] = settings[f"{EventLog.name.upper()}_CREATE_TABLE"] = "no"
    return strtobool(said)


def _defaults(workspace: Workspace) -> dict[str, str]:
    return {
        "PERSISTENCE_MODULE": DEFAULT_PERSISTENCE_MODULE,
        "LMDB_PATH": str(workspace.log_dir),
        "COMPRESSOR_TOPIC": "metnos.mechanisms.store.compressor:ZstdCompressor",
    }


@dataclass(frozen=True)
class LoggedEvent:
    """A notification decoded for people and for --json."""

    id: int
    aggregate_id: str
    aggregate_version: int
    topic: str
    timestamp: datetime | None
    state: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.topic.rsplit(":", 1)[-1]
