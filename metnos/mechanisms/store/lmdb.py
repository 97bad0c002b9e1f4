"""An LMDB persistence module for eventsourcing.

Select it with ``PERSISTENCE_MODULE=metnos.mechanisms.store.lmdb``. Settings, read from
the application's environment like the library's own backends (each may be
prefixed with the upper-cased application name):

``LMDB_PATH``           folder of the LMDB environment (default: the workspace's log)
``LMDB_MAP_SIZE``       initial map size in bytes (default 256 MiB; it grows by itself)
``LMDB_SYNC``           ``yes`` (default): every commit is fsynced; ``no``: faster,
                        a crash may lose the last commits but never corrupts the log
``LMDB_POLL_INTERVAL``  seconds between checks for commits made by other processes
                        (default 0.1); commits of this process wake subscribers at once

Every insert is one LMDB write transaction: a batch of events (and its tracking
record, for a process recorder) commits whole or not at all. LMDB serialises
writers across threads and processes, and notification ids are taken inside the
write transaction, so they are unique, ordered and never interleaved.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    IntegrityError,
    ListenNotifySubscription,
    Mapper,
    Notification,
    ProcessRecorder,
    StoredEvent,
    Subscription,
    Tracking,
    TrackingRecorder,
    Transcoder,
)
from eventsourcing.utils import Environment, resolve_topic, strtobool

from metnos.mechanisms.store import environment as environments
from metnos.mechanisms.store.errors import LOG_DAMAGE_ADVICE, BadLogSetting, LogFromNewerVersion
from metnos.mechanisms.store.mapper import FastMapper, StoredRow, row_of
from metnos.mechanisms.store.records import (
    decode_event,
    decode_notification,
    scan_rows,
    LaidOut,
    encode_event,
    event_key,
    id_bytes,
    id_from_bytes,
    originator_key,
    peek_topic,
    version_bytes,
)
from metnos.mechanisms.store.transcoder import OrjsonTranscoder
from metnos.settings.loader import env_section
from metnos.settings.workspace import Workspace
from metnos.mechanisms.store.errors import CorruptRecord
from metnos.mechanisms.store.record_feed import feed_records
from metnos.mechanisms.store.record_batches import RecordCursor, batch_value, chunks, index_positions, run_length, run_value, runs
from metnos.mechanisms.store.event_scan import scan_events

if TYPE_CHECKING:
    from uuid import UUID

    import lmdb

    from eventsourcing.utils import EnvType

# 2: a commit's records may be held in one value, and an aggregate's versions of one commit in one
# index entry (metnos/mechanisms/store/record_batches.py); a log of format 1 is read as it was.
LOG_FORMAT = 2
_META_DB = "metnos.meta"
_FORMAT_KEY = b"log_format"


class LMDBRecorder:
    """Holds the shared environment and the names of this recorder's tables."""

    def __init__(self, shared: environments.SharedEnvironment, table_name: str) -> None:
        self.shared = shared
        self.table_name = table_name


class LMDBAggregateRecorder(LMDBRecorder, AggregateRecorder):
    """Events by (originator id, version); used for snapshots."""

    def __init__(self, shared: environments.SharedEnvironment, table_name: str) -> None:
        super().__init__(shared, table_name)
        self._events_db = shared.db(table_name)

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        def body(txn: lmdb.Transaction) -> None:
            for s in stored_events:
                key = event_key(s.originator_id, s.originator_version)
                if not txn.put(key, encode_event(s), db=self._events_db, overwrite=False):
                    msg = f"Stored event already recorded: {s.originator_id} version {s.originator_version}"
                    raise IntegrityError(msg)

        self.shared.write(body)
        return None

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        with self.shared.read() as txn:
            return [
                decode_event(self.table_name, key, value)
                for key, value in _scan_aggregate(txn, self._events_db, originator_id, gt, lte, desc, limit)
            ]


class LMDBApplicationRecorder(LMDBRecorder, ApplicationRecorder):
    """Events with notification ids, in one sequence per application."""

    def __init__(
        self,
        shared: environments.SharedEnvironment,
        table_name: str,
        *,
        poll_interval: float = 0.1,
    ) -> None:
        super().__init__(shared, table_name)
        # The index maps (originator id, version) to a notification id; the
        # record itself is stored once, under its notification id.
        self._index_db = shared.db(table_name)
        self._notifications_db = shared.db(table_name + ".notifications")
        self.poll_interval = poll_interval
        # The log's format is raised to this Metnos's at its first write (a batch needs it).
        self._format_marked = False
        self._meta_db = shared.db(_META_DB)

    @property
    def notifications_table(self) -> str:
        return self.table_name + ".notifications"

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        return self.insert_rows([row_of(s) for s in stored_events], **kwargs)

    def lay_out(self, rows: Sequence[StoredRow]) -> LaidOut:
        """``rows`` with their keys and records made, for ``insert_rows`` to write later."""
        return LaidOut.of(rows)

    def insert_rows(self, rows: Sequence[StoredRow] | LaidOut, **kwargs: Any) -> Sequence[int] | None:
        """``insert_events`` of ``(originator id, originator version, topic, state)``, which a
        save makes without a ``StoredEvent`` an event (``FastMapper.stored_rows``), or of rows
        already laid out (``lay_out``)."""
        tracking: Tracking | None = kwargs.get("tracking")
        ids = self.shared.write(lambda txn: self._insert(txn, rows, tracking))
        # Marked once a write that raised it has committed (one that failed took the mark with it).
        self._format_marked = True
        return ids

    def _insert(
        self,
        txn: lmdb.Transaction,
        rows: Sequence[StoredRow] | LaidOut,
        tracking: Tracking | None,
    ) -> list[int]:
        laid_out = rows if isinstance(rows, LaidOut) else LaidOut.of(rows)
        count = len(laid_out)
        if not self._format_marked:
            _mark_log_format(txn, self._meta_db)
        with txn.cursor(db=self._notifications_db) as cursor:
            last_id = id_from_bytes(cursor.key()) if cursor.last() else 0
            ids = list(range(last_id + 1, last_id + 1 + count))
            keys = laid_out.event_keys
            with txn.cursor(db=self._index_db) as index:
                for _, first, last, end in runs(laid_out.rows):
                    run_key = keys[end]
                    prefix = run_key[:-8]
                    # A run recorded before that ends at or after this one's first version and starts
                    # at or before its last holds one of its versions.
                    if index.set_range(prefix + version_bytes(first)):
                        held, value = index.item()
                        if held.startswith(prefix) and _version_of(held) - run_length(self.table_name, held, value) + 1 <= last:
                            raise IntegrityError(_duplicate_message(laid_out.rows))
                    index.put(run_key, run_value(last_id + 1 + end, last - first + 1))
            records = laid_out.records
            for start, stop in chunks(records):
                value = records[start] if stop - start == 1 else batch_value(records[start:stop])
                cursor.put(id_bytes(ids[stop - 1]), value, append=True)
        if tracking is not None:
            self._insert_tracking_in(txn, tracking)
        return ids

    def _insert_tracking_in(self, txn: lmdb.Transaction, tracking: Tracking) -> None:
        msg = "this recorder does not track upstream positions"
        raise NotImplementedError(msg)

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        table = self.notifications_table
        with self.shared.read() as txn, txn.cursor(db=self._notifications_db) as raw:
            records = RecordCursor(raw, table)
            events = []
            for position in _aggregate_positions(txn, self._index_db, originator_id, gt, lte, desc, limit, self.table_name):
                id_key = id_bytes(position)
                if not records.set_key(id_key):
                    raise _dangling(table, id_key)
                events.append(decode_event(table, id_key, records.value()))
            return events

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        if start is None:
            first = 1
        else:
            first = start if inclusive_of_start else start + 1
        first = max(first, 1)
        wanted = frozenset(topics)
        table = self.notifications_table
        results: list[Notification] = []
        if limit <= 0:
            return results
        with self.shared.read() as txn, txn.cursor(db=self._notifications_db) as raw:
            cursor = RecordCursor(raw, table)
            if not cursor.set_range(id_bytes(first)):
                return results
            for key, value in cursor:
                if stop is not None and id_from_bytes(key) > stop:
                    break
                if wanted and peek_topic(table, key, value) not in wanted:
                    continue
                results.append(decode_notification(table, key, value))
                if len(results) >= limit:
                    break
        return results

    def scan(self, start: int = 1, batch: int = 5000, topics: frozenset[str] | None = None) -> Iterator[tuple[int, UUID | str, int, str, bytes]]:
        """Every record from ``start`` on as plain tuples ``(id, originator id, version, topic, state)``."""
        for rows in self.scan_batches(start, batch, topics):
            yield from rows

    def scan_batches(
        self, start: int = 1, batch: int = 5000, topics: frozenset[str] | None = None, *, ids_as_text: bool = False
    ) -> Iterator[list[tuple[int, UUID | str, int, str, bytes]]]:
        """The records of ``scan``, a list at a time: rebuilds and audits loop over lists, not a generator.

        With ``topics``, only records of those topics are returned (the others
        are skipped before their ids and states are read); with ``ids_as_text``,
        originator ids are text, as records want them. Reads ``batch``
        records a transaction, each short, so a long scan never pins old pages;
        a list may be empty when none of its records matched.
        """
        table = self.notifications_table
        position = max(start, 1)
        while True:
            last: int | None = None
            rows: list = []
            with self.shared.read() as txn, txn.cursor(db=self._notifications_db) as raw:
                cursor = RecordCursor(raw, table)
                if cursor.set_range(id_bytes(position)):
                    rows, last = scan_rows(table, cursor, batch, topics, ids_as_text=ids_as_text)
            if rows:
                yield rows
            if last is None:
                return
            position = last + 1

    def feed_records(self, mapper: Any, feeds: Any, loaders: Any = None, start: int = 1, *, progress: Any = None) -> int | None:
        """Records of the feeds' topics straight to them: the rebuild's loop (metnos/mechanisms/store/record_feed.py)."""

        return feed_records(self, mapper, feeds, loaders, start, progress=progress)

    def scan_events(self, mapper: Any, start: int = 1, topics: frozenset[str] | None = None) -> Iterator[Iterator[tuple[int, Any]]]:
        """Batches of (id, domain event) straight from the stored bytes: the full scan's loop (metnos/mechanisms/store/event_scan.py)."""
        return scan_events(self, mapper, start, topics)

    def max_notification_id(self) -> int | None:
        with self.shared.read() as txn, txn.cursor(db=self._notifications_db) as cursor:
            return id_from_bytes(cursor.key()) if cursor.last() else None

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()) -> Subscription[ApplicationRecorder]:
        return LMDBSubscription(self, gt=gt, topics=topics)


class LMDBSubscription(ListenNotifySubscription[LMDBApplicationRecorder]):
    """Woken at once by commits in this process, and by polling for others'."""

    def __init__(self, recorder: LMDBApplicationRecorder, gt: int | None = None, topics: Sequence[str] = ()) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        recorder.shared.listen(self._has_been_notified)
        self._poll_stop = threading.Event()
        self._poller = threading.Thread(target=self._poll_other_processes, daemon=True)
        self._poller.start()

    def _poll_other_processes(self) -> None:
        seen = self._recorder.max_notification_id()
        while not self._poll_stop.wait(self._recorder.poll_interval):
            latest = self._recorder.max_notification_id()
            if latest != seen:
                seen = latest
                self._has_been_notified.set()

    def stop(self) -> None:
        super().stop()
        self._poll_stop.set()
        self._recorder.shared.unlisten(self._has_been_notified)


class LMDBTrackingRecorder(LMDBRecorder, TrackingRecorder):
    """How far each upstream application has been processed.

    Subclasses that are materialised views write their own tables together
    with the tracking record through ``_write_tracked``, in one transaction.
    """

    def __init__(self, shared: environments.SharedEnvironment, table_name: str, **kwargs: Any) -> None:
        super().__init__(shared, table_name)
        self._tracking_db = shared.db(table_name + ".tracking")

    def insert_tracking(self, tracking: Tracking) -> None:
        self.shared.write(lambda txn: self._insert_tracking_in(txn, tracking))

    def _insert_tracking_in(self, txn: lmdb.Transaction, tracking: Tracking) -> None:
        key = tracking.application_name.encode("utf-8")
        current = txn.get(key, db=self._tracking_db)
        if current is not None and id_from_bytes(current) >= tracking.notification_id:
            msg = (
                f"Tracking notification ID {tracking.notification_id} for "
                f"'{tracking.application_name}' is not greater than the recorded {id_from_bytes(current)}"
            )
            raise IntegrityError(msg)
        txn.put(key, id_bytes(tracking.notification_id), db=self._tracking_db)

    def _write_tracked(self, tracking: Tracking, body: Any) -> Any:
        """Run ``body(txn)`` and record ``tracking`` in the same transaction."""

        def both(txn: lmdb.Transaction) -> Any:
            self._insert_tracking_in(txn, tracking)
            return body(txn)

        return self.shared.write(both)

    def max_tracking_id(self, application_name: str) -> int | None:
        with self.shared.read() as txn:
            value = txn.get(application_name.encode("utf-8"), db=self._tracking_db)
            return None if value is None else id_from_bytes(value)


class LMDBProcessRecorder(LMDBTrackingRecorder, LMDBApplicationRecorder, ProcessRecorder):
    """New events and the position they answer to, committed together."""

    def __init__(self, shared: environments.SharedEnvironment, table_name: str, *, poll_interval: float = 0.1) -> None:
        LMDBApplicationRecorder.__init__(self, shared, table_name, poll_interval=poll_interval)
        self._tracking_db = shared.db(table_name + ".tracking")


class LMDBFactory(InfrastructureFactory[LMDBTrackingRecorder]):
    LMDB_PATH = "LMDB_PATH"
    LMDB_MAP_SIZE = "LMDB_MAP_SIZE"
    LMDB_SYNC = "LMDB_SYNC"
    LMDB_POLL_INTERVAL = "LMDB_POLL_INTERVAL"

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        path = self.env.get(self.LMDB_PATH) or str(_default_log_path())
        map_size = self._int_setting(self.LMDB_MAP_SIZE, environments.DEFAULT_MAP_SIZE)
        sync = self._bool_setting(self.LMDB_SYNC, default=True)
        self.poll_interval = self._float_setting(self.LMDB_POLL_INTERVAL, 0.1)
        self.shared = environments.acquire(Path(path), map_size=map_size, sync=sync, damage_advice=LOG_DAMAGE_ADVICE)
        self._closed = False
        try:
            _check_log_format(self.shared)
        except BaseException:
            self.close()
            raise

    @property
    def _prefix(self) -> str:
        return (self.env.name or "metnos").lower()

    def transcoder(self) -> Transcoder:
        topic = self.env.get(self.TRANSCODER_TOPIC)
        if topic:
            return resolve_topic(topic)()
        return OrjsonTranscoder()

    def mapper(self, transcoder: Transcoder | None = None, mapper_class: type[Mapper] | None = None) -> Mapper:
        if mapper_class is None and not self.env.get(self.MAPPER_TOPIC):
            mapper_class = FastMapper
        return super().mapper(transcoder=transcoder, mapper_class=mapper_class)

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        return LMDBAggregateRecorder(self.shared, f"{self._prefix}_{purpose}")

    def application_recorder(self) -> ApplicationRecorder:
        cls = self._recorder_class(self.APPLICATION_RECORDER_TOPIC, LMDBApplicationRecorder)
        return cls(self.shared, f"{self._prefix}_events", poll_interval=self.poll_interval)

    def tracking_recorder(self, tracking_recorder_class: type[LMDBTrackingRecorder] | None = None) -> LMDBTrackingRecorder:
        cls = tracking_recorder_class or self._recorder_class(self.TRACKING_RECORDER_TOPIC, LMDBTrackingRecorder)
        return cls(self.shared, f"{self._prefix}_view")

    def process_recorder(self) -> ProcessRecorder:
        cls = self._recorder_class(self.PROCESS_RECORDER_TOPIC, LMDBProcessRecorder)
        return cls(self.shared, f"{self._prefix}_events", poll_interval=self.poll_interval)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            environments.release(self.shared)

    def _recorder_class(self, key: str, default: type) -> Any:
        topic = self.env.get(key)
        return resolve_topic(topic) if topic else default

    def _int_setting(self, key: str, default: int) -> int:
        return self._positive(key, default, int, "a positive whole number of bytes")

    def _float_setting(self, key: str, default: float) -> float:
        return self._positive(key, default, float, "a positive number of seconds")

    def _positive(self, key: str, default: Any, cast: Any, what: str) -> Any:
        raw = self.env.get(key)
        if not raw:
            return default
        try:
            value = cast(raw)
        except ValueError:
            value = 0
        if value <= 0:
            msg = f"{key}={raw!r} is not {what}"
            raise BadLogSetting(msg)
        return value

    def _bool_setting(self, key: str, *, default: bool) -> bool:
        raw = self.env.get(key)
        if not raw:
            return default
        try:
            return bool(strtobool(raw))
        except ValueError:
            msg = f"{key}={raw!r} is not yes or no"
            raise BadLogSetting(msg) from None


Factory = LMDBFactory


def _default_log_path() -> Path:
    return Workspace.from_config(env_section("workspace")).log_dir


def _check_log_format(shared: environments.SharedEnvironment) -> None:
    meta = shared.db(_META_DB)

    def body(txn: lmdb.Transaction) -> int:
        raw = txn.get(_FORMAT_KEY, db=meta)
        if raw is None:
            txn.put(_FORMAT_KEY, str(LOG_FORMAT).encode(), db=meta)
            return LOG_FORMAT
        return int(raw)

    with shared.read() as txn:
        raw = txn.get(_FORMAT_KEY, db=meta)
    found = int(raw) if raw is not None else shared.write(body)
    if found > LOG_FORMAT:
        msg = (
            f"the log at {shared.path} was written by a newer Metnos (log format {found}, "
            f"this one reads up to {LOG_FORMAT}); upgrade Metnos, nothing was changed"
        )
        raise LogFromNewerVersion(msg)


def _mark_log_format(txn: lmdb.Transaction, meta: object) -> None:
    """The log's format raised to this Metnos's, in the write that first needs it: a log written
    by an older Metnos takes batches from then on, and that Metnos refuses it with the reason."""
    raw = txn.get(_FORMAT_KEY, db=meta)
    if raw is None or int(raw) < LOG_FORMAT:
        txn.put(_FORMAT_KEY, str(LOG_FORMAT).encode(), db=meta)


def _version_of(key: bytes) -> int:
    return int.from_bytes(key[-8:], "big") - (1 << 63)


def _aggregate_positions(
    txn: lmdb.Transaction,
    db: object,
    originator_id: UUID | str,
    gt: int | None,
    lte: int | None,
    desc: bool,
    limit: int | None,
    table: str = "the index",
) -> list[int]:
    """The notification ids of an aggregate's versions after ``gt`` up to ``lte``, in version order
    (or its reverse), from the index's runs (``record_batches``)."""
    found: list[int] = []
    if limit is not None and limit <= 0:
        return found
    prefix = originator_key(originator_id)
    low = gt + 1 if gt is not None else None
    with txn.cursor(db=db) as cursor:
        if not desc:
            # The first run that ends at or after ``low`` is the one that may hold it.
            if not cursor.set_range(prefix + version_bytes(low) if low is not None else prefix):
                return found
            for key, value in cursor:
                if not key.startswith(prefix):
                    break
                for version, position in index_positions(table, key, value):
                    if low is not None and version < low:
                        continue
                    if lte is not None and version > lte:
                        return found
                    found.append(position)
                    if limit is not None and len(found) >= limit:
                        return found
            return found
        # Descending: from the run that may hold ``lte`` (or the aggregate's last), back.
        positioned = cursor.set_range(prefix + (version_bytes(lte) if lte is not None else b"\xff" * 9))
        moved = (cursor.key().startswith(prefix) or cursor.prev()) if positioned else cursor.last()
        while moved:
            key, value = cursor.item()
            if not key.startswith(prefix):
                break
            for version, position in reversed(index_positions(table, key, value)):
                if lte is not None and version > lte:
                    continue
                if low is not None and version < low:
                    return found
                found.append(position)
                if limit is not None and len(found) >= limit:
                    return found
            moved = cursor.prev()
        return found


def _scan_aggregate(
    txn: lmdb.Transaction,
    db: object,
    originator_id: UUID | str,
    gt: int | None,
    lte: int | None,
    desc: bool,
    limit: int | None,
) -> list[tuple[bytes, bytes]]:
    prefix = originator_key(originator_id)
    low = prefix + version_bytes(gt + 1) if gt is not None else prefix
    found: list[tuple[bytes, bytes]] = []
    if limit is not None and limit <= 0:
        return found
    with txn.cursor(db=db) as cursor:
        if not desc:
            if not cursor.set_range(low):
                return found
            for key, value in cursor:
                if not key.startswith(prefix):
                    break
                if lte is not None and key > prefix + version_bytes(lte):
                    break
                found.append((key, value))
                if limit is not None and len(found) >= limit:
                    break
            return found
        # Descending: start just past the upper bound and walk back.
        positioned = cursor.set_range(prefix + version_bytes(lte + 1)) if lte is not None else cursor.set_range(prefix + b"\xff" * 9)
        moved = cursor.prev() if positioned else cursor.last()
        while moved:
            key, value = cursor.item()
            if not key.startswith(prefix) or key < low:
                break
            found.append((key, value))
            if limit is not None and len(found) >= limit:
                break
            moved = cursor.prev()
        return found


def _duplicate_message(rows: Sequence[StoredRow]) -> str:
    seen = set()
    for originator_id, originator_version, _, _ in rows:
        key = (originator_id, originator_version)
        if key in seen:
            return f"Stored events are not unique: {originator_id} version {originator_version} twice in one batch"
        seen.add(key)
    # Not a repeat inside the batch, so one of them was recorded before.
    return f"Stored event already recorded: a batch of {len(rows)} events from {rows[0][0]} repeats a version already in the log"


def _dangling(table: str, id_key: bytes) -> Exception:

    return CorruptRecord(table, id_key, "the index points at a notification that is missing")
