"""A log changed behind Metnos's back, for the tests that need one: an event's record edited in
place, an event lost. They work on the stored layout whatever holds the event (a record a value,
or a commit's batch; metnos/mechanisms/store/record_batches.py), inside the caller's write
transaction, and keep the rest of the log as it was."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from metnos.mechanisms.store.lmdb import LMDBApplicationRecorder, _aggregate_positions, _version_of
from metnos.mechanisms.store.record_batches import batch_value, held, run_length, run_value
from metnos.mechanisms.store.records import event_key, id_bytes, id_from_bytes, originator_key, version_bytes


def positions(txn: Any, recorder: LMDBApplicationRecorder, originator_id: UUID | str) -> list[int]:
    """The notification ids of the aggregate's events, in version order."""
    return _aggregate_positions(txn, recorder._index_db, originator_id, None, None, False, None)


def record_at(txn: Any, recorder: LMDBApplicationRecorder, notification_id: int) -> bytes:
    first, records = _holder(txn, recorder, notification_id)[1:]
    return records[notification_id - first]


def replace_record(txn: Any, recorder: LMDBApplicationRecorder, notification_id: int, record: bytes) -> None:
    """The record of one notification replaced by ``record``, where it is held."""
    key, first, records = _holder(txn, recorder, notification_id)
    records[notification_id - first] = record
    txn.put(key, _value(records), db=recorder._notifications_db)


def drop_event(txn: Any, recorder: LMDBApplicationRecorder, originator_id: UUID | str, version: int) -> int:
    """The event gone from the log, its record and its index entry, as a lost page would leave it;
    the notification id it had."""
    prefix = originator_key(originator_id)
    with txn.cursor(db=recorder._index_db) as index:
        if not index.set_range(prefix + version_bytes(version)) or not index.key().startswith(prefix):
            raise KeyError((originator_id, version))
        run_key, value = index.item()
        last_version, length = _version_of(run_key), run_length(recorder.table_name, run_key, value)
        last_id = id_from_bytes(value[:8])
        first_version = last_version - length + 1
        if version < first_version:
            raise KeyError((originator_id, version))
        notification_id = last_id - (last_version - version)
        index.delete()
    if version > first_version:
        txn.put(event_key(originator_id, version - 1), run_value(notification_id - 1, version - first_version), db=recorder._index_db)
    if version < last_version:
        txn.put(run_key, run_value(last_id, last_version - version), db=recorder._index_db)
    key, first, records = _holder(txn, recorder, notification_id)
    txn.delete(key, db=recorder._notifications_db)
    before, after = records[: notification_id - first], records[notification_id - first + 1 :]
    if before:
        txn.put(id_bytes(notification_id - 1), _value(before), db=recorder._notifications_db)
    if after:
        txn.put(key, _value(after), db=recorder._notifications_db)
    return notification_id


def _holder(txn: Any, recorder: LMDBApplicationRecorder, notification_id: int) -> tuple[bytes, int, list[bytes]]:
    with txn.cursor(db=recorder._notifications_db) as cursor:
        if not cursor.set_range(id_bytes(notification_id)):
            raise KeyError(notification_id)
        key, value = cursor.item()
    first, records = held(recorder.notifications_table, key, value)
    if not first <= notification_id < first + len(records):
        raise KeyError(notification_id)
    return key, first, list(records)


def _value(records: list[bytes]) -> bytes:
    return records[0] if len(records) == 1 else batch_value(records)
