"""Every event class in domain/, made by its own constructor and saved, comes back from the
full scan's one loop (``scan_events``, which makes an event with ``object.__new__`` and sets
its dict whole) equal to what the constructor made and to what the layered path reads: same
class, same fields, same values.

The states are samples from each field's declared type, so a new event class is covered the
day it is written; a field of a type the samples do not know fails here, naming it.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import types
import typing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.domain import AggregateEvent
from eventsourcing.utils import get_topic, resolve_topic

import domain
from metnos.mechanisms.store import environment as environments
from metnos.mechanisms.store import event_scan
from metnos.mechanisms.store.event_scan import scan_events
from metnos.mechanisms.store.lmdb import LMDBApplicationRecorder
from tests.contract.test_record_feed import fast
from tests.contract.scan_loops import each_scan_loop  # noqa: F401 - every test here runs with both loops

AT = datetime(2026, 11, 22, 8, 0, 0, 250000, tzinfo=timezone(timedelta(hours=1)))
SAMPLES: dict[Any, Any] = {
    str: "a sample",
    int: 42,
    bool: True,
    float: 2.5,
    dict: {"key": [1, "two", {"three": None}]},
    list: ["one", 2, {"three": 3.5}],
    Any: {"any": [True]},
}


def event_classes() -> list[type]:
    """Every aggregate event class the domain defines, as its topic resolves (the class a scan makes)."""
    for module in pkgutil.walk_packages(domain.__path__, "domain."):
        importlib.import_module(module.name)
    found: set[type] = set()
    pending = [AggregateEvent]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if sub.__module__.startswith("domain.") and dataclasses.is_dataclass(sub):
                # The aggregate's metaclass makes a class twice; its topic names the one a scan makes.
                found.add(resolve_topic(f"{sub.__module__}:{sub.__qualname__}"))
    return sorted(found, key=get_topic)


def sample(cls: type, field: str, hint: Any) -> Any:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if hint not in SAMPLES:
        pytest.fail(f"{get_topic(cls)}.{field} is a {hint!r}, which this test has no sample of: add one to SAMPLES")
    return SAMPLES[hint]


def made_by_the_constructor(cls: type, version: int, originator_id: UUID) -> Any:
    hints = typing.get_type_hints(cls)
    own = {"originator_id", "originator_version", "timestamp"}
    fields = {f.name: sample(cls, f.name, hints[f.name]) for f in dataclasses.fields(cls) if f.init and f.name not in own}
    return cls(originator_id=originator_id, originator_version=version, timestamp=AT + timedelta(microseconds=version), **fields)


CLASSES = event_classes()


def test_the_domain_has_event_classes_to_check() -> None:
    # The walk of domain/ found the package's events, not an empty list that would pass anything.
    assert len(CLASSES) > 50
    assert all(issubclass(cls, AggregateEvent) for cls in CLASSES)


def test_every_domain_event_class_scans_back_to_what_its_constructor_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mapper = fast()
    # Two aggregates, each class's event in a row of its own topic, then every class again on the other.
    made = [made_by_the_constructor(cls, n, UUID(int=1)) for n, cls in enumerate(CLASSES, 1)]
    made += [made_by_the_constructor(cls, n, UUID(int=2)) for n, cls in enumerate(CLASSES + CLASSES, 1)]
    shared = environments.acquire(tmp_path, sync=False)
    try:
        recorder = LMDBApplicationRecorder(shared, "events")
        recorder.insert_events([mapper.to_stored_event(event) for event in made])
        layered = [(row[0], e) for rows in recorder.scan_batches(1) for row, e in zip(rows, mapper.decode_rows(rows), strict=True)]
        # Every record here is a plain state: the one loop reads each itself but for the classes
        # that upcast (class_version above 1), which it hands on one by one, or this would test the layered path instead.
        monkeypatch.setattr(event_scan, "scan_rows", lambda *args, **kwargs: pytest.fail("the layered path read a batch"))
        decode_rows, handed_on = mapper.decode_rows, set()

        def one_by_one(rows: Any) -> list[Any]:
            rows = list(rows)
            handed_on.update(row[3] for row in rows)
            return decode_rows(rows)

        monkeypatch.setattr(mapper, "decode_rows", one_by_one)
        scanned = [pair for events in scan_events(recorder, mapper, batch=100) for pair in events]
    finally:
        environments.release(shared)
    assert handed_on == {get_topic(cls) for cls in CLASSES if getattr(cls, "class_version", 1) > 1}
    assert [nid for nid, _ in scanned] == list(range(1, len(made) + 1))
    for (nid, got), (_, read), expected in zip(scanned, layered, made, strict=True):
        assert type(got) is type(expected) is type(read), nid
        assert got.__dict__ == expected.__dict__ == read.__dict__, get_topic(type(expected))
        assert list(got.__dict__) == list(read.__dict__), get_topic(type(expected))
        assert got == expected
        assert type(got.timestamp) is datetime and type(got.originator_id) is UUID and type(got.originator_version) is int


def recorded_log(tmp_path: Path) -> Any:
    """A copy of the log an older Metnos recorded (tests/fixtures/layered_log), opened; the caller closes it."""
    import shutil

    from metnos.mechanisms.eventlog import EventLog
    from metnos.settings.workspace import Workspace

    recorded = Path(__file__).resolve().parents[1] / "fixtures" / "layered_log" / "recorded" / "log" / "data.mdb"
    (tmp_path / "log").mkdir()
    shutil.copyfile(recorded, tmp_path / "log" / "data.mdb")
    return EventLog(Workspace(tmp_path / "data", tmp_path / "config"), env={"LMDB_PATH": str(tmp_path / "log"), "LMDB_SYNC": "no"})


def test_the_recorded_layered_log_scans_to_what_the_layered_path_reads_field_order_included(tmp_path: Path) -> None:
    """A log recorded by an older Metnos (tests/fixtures/layered_log) reads back through the full scan's
    one loop as through the layered path: the same events, their fields in the same order."""
    log = recorded_log(tmp_path)
    try:
        scanned = list(log.domain_events())
        layered = list(log._decoded_events(1, frozenset()))
    finally:
        log.close()
    assert len(scanned) == len(layered) > 100
    for (nid, got), (lid, read) in zip(scanned, layered, strict=True):
        assert nid == lid and type(got) is type(read), nid
        assert list(got.__dict__.items()) == list(read.__dict__.items()), (nid, type(got).__name__)
