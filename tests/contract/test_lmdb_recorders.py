"""eventsourcing's own recorder contract, run against the LMDB module."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from eventsourcing.persistence import InfrastructureFactory, Tracking
# Imported as modules so that pytest does not collect the abstract cases.
from eventsourcing.tests import application as application_contract
from eventsourcing.tests import persistence as contract
from eventsourcing.tests import projection as projection_contract
from eventsourcing.utils import Environment

from metnos.mechanisms.store import environment as environments
from metnos.mechanisms.store.lmdb import (
    LMDBAggregateRecorder,
    LMDBApplicationRecorder,
    LMDBFactory,
    LMDBProcessRecorder,
    LMDBTrackingRecorder,
)
from metnos.mechanisms.store.records import id_bytes, id_from_bytes


class TemporaryLog:
    """A fresh LMDB folder per test, and the shared environment closed after."""

    def setUp(self) -> None:
        self.log_dir = Path(tempfile.mkdtemp(prefix="metnos-lmdb-"))
        # Durable commits are what users get, but the contract is about
        # semantics; the durability tests below run with sync on.
        self.shared = environments.acquire(self.log_dir, sync=False)
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        environments.release(self.shared)
        shutil.rmtree(self.log_dir, ignore_errors=True)


class TestAggregateRecorder(TemporaryLog, contract.AggregateRecorderTestCase):
    def create_recorder(self) -> LMDBAggregateRecorder:
        return LMDBAggregateRecorder(self.shared, "test_snapshots")


class TestApplicationRecorder(TemporaryLog, contract.ApplicationRecorderTestCase):
    def create_recorder(self) -> LMDBApplicationRecorder:
        return LMDBApplicationRecorder(self.shared, "test_events", poll_interval=0.05)

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestNonInterleavingNotificationIDs(TemporaryLog, contract.NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> LMDBApplicationRecorder:
        return LMDBApplicationRecorder(self.shared, "test_events")


class TestTrackingRecorder(TemporaryLog, contract.TrackingRecorderTestCase):
    def create_recorder(self) -> LMDBTrackingRecorder:
        return LMDBTrackingRecorder(self.shared, "test_view")


class TestProcessRecorder(TemporaryLog, contract.ProcessRecorderTestCase):
    def create_recorder(self) -> LMDBProcessRecorder:
        return LMDBProcessRecorder(self.shared, "test_events")


class CustomTrackingRecorder(LMDBTrackingRecorder):
    pass


class TestInfrastructureFactory(contract.InfrastructureFactoryTestCase[LMDBFactory]):
    def setUp(self) -> None:
        self.log_dir = Path(tempfile.mkdtemp(prefix="metnos-lmdb-"))
        self.env = Environment("TestCase")
        self.env[InfrastructureFactory.PERSISTENCE_MODULE] = "metnos.mechanisms.store.lmdb"
        self.env["LMDB_PATH"] = str(self.log_dir)
        self.env["LMDB_SYNC"] = "no"
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        shutil.rmtree(self.log_dir, ignore_errors=True)

    def expected_factory_class(self) -> type[LMDBFactory]:
        return LMDBFactory

    def expected_aggregate_recorder_class(self) -> type[LMDBAggregateRecorder]:
        return LMDBAggregateRecorder

    def expected_application_recorder_class(self) -> type[LMDBApplicationRecorder]:
        return LMDBApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[LMDBTrackingRecorder]:
        return LMDBTrackingRecorder

    def tracking_recorder_subclass(self) -> type[LMDBTrackingRecorder]:
        return CustomTrackingRecorder

    def expected_process_recorder_class(self) -> type[LMDBProcessRecorder]:
        return LMDBProcessRecorder


def lmdb_env(log_dir: Path) -> dict[str, str]:
    return {
        "PERSISTENCE_MODULE": "metnos.mechanisms.store.lmdb",
        "LMDB_PATH": str(log_dir),
        "LMDB_SYNC": "no",
        "LMDB_POLL_INTERVAL": "0.05",
    }


class TestExampleApplication(application_contract.ExampleApplicationTestCase):
    expected_factory_topic = "metnos.mechanisms.store.lmdb:LMDBFactory"

    def setUp(self) -> None:
        super().setUp()
        self.log_dir = Path(tempfile.mkdtemp(prefix="metnos-lmdb-"))
        self._saved = {k: v for k, v in __import__("os").environ.items() if k in lmdb_env(self.log_dir)}
        __import__("os").environ.update(lmdb_env(self.log_dir))

    def tearDown(self) -> None:
        import os

        for key in lmdb_env(self.log_dir):
            os.environ.pop(key, None)
        os.environ.update(self._saved)
        shutil.rmtree(self.log_dir, ignore_errors=True)
        super().tearDown()


class LMDBEventCountersView(LMDBTrackingRecorder, projection_contract.EventCountersView):
    """The projection test cases' view, kept in the same LMDB environment."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._counters_db = self.shared.db(self.table_name + ".counters")

    def _get(self, name: bytes) -> int:
        with self.shared.read() as txn:
            raw = txn.get(name, db=self._counters_db)
            return 0 if raw is None else id_from_bytes(raw)

    def _incr(self, name: bytes, tracking: Tracking) -> None:
        def body(txn) -> None:  # type: ignore[no-untyped-def]
            raw = txn.get(name, db=self._counters_db)
            txn.put(name, id_bytes((0 if raw is None else id_from_bytes(raw)) + 1), db=self._counters_db)

        self._write_tracked(tracking, body)

    def get_created_event_counter(self) -> int:
        return self._get(b"created")

    def get_subsequent_event_counter(self) -> int:
        return self._get(b"subsequent")

    def incr_created_event_counter(self, tracking: Tracking) -> None:
        self._incr(b"created", tracking)

    def incr_subsequent_event_counter(self, tracking: Tracking) -> None:
        self._incr(b"subsequent", tracking)


class TestEventCountersView(TemporaryLog, projection_contract.EventCountersViewTestCase):
    def construct_event_counters_view(self) -> LMDBEventCountersView:
        return LMDBEventCountersView(self.shared, "counters_view")


class TestAggregateEventCountersProjection(projection_contract.AggregateEventCountersProjectionTestCase):
    view_class = LMDBEventCountersView

    def setUp(self) -> None:
        self.log_dir = Path(tempfile.mkdtemp(prefix="metnos-lmdb-"))
        type(self).env = lmdb_env(self.log_dir)
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        shutil.rmtree(self.log_dir, ignore_errors=True)


class TestEventSourcedProjection(projection_contract.EventSourcedProjectionTestCase):
    def setUp(self) -> None:
        self.log_dir = Path(tempfile.mkdtemp(prefix="metnos-lmdb-"))
        type(self).env = lmdb_env(self.log_dir)
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        shutil.rmtree(self.log_dir, ignore_errors=True)
