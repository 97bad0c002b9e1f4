"""The scale-out path: the same application contract on a real PostgreSQL."""

from __future__ import annotations

import os
import threading
from datetime import datetime, timezone
from uuid import uuid4

import pytest
from eventsourcing.tests import application as application_contract

from domain.base import Created, MetnosAggregate
from metnos.mechanisms.eventlog import EventLog
from tests.support.shared_log import fresh_database

pytestmark = pytest.mark.postgres


class Note(MetnosAggregate):
    class Written(Created):
        text: str

    def __init__(self, text: str) -> None:
        self.text = text


@pytest.fixture
def postgres_process_env(postgres_env, monkeypatch):
    monkeypatch.setenv("PERSISTENCE_MODULE", "eventsourcing.postgres")
    monkeypatch.setenv("POSTGRES_POOL_SIZE", "4")
    for key, value in postgres_env.items():
        monkeypatch.setenv(key, value)
    return postgres_env


def test_example_application_contract_on_postgres(postgres_process_env) -> None:
    # The library's own application test case, driven by environment variables
    # only (defined here so that pytest does not collect it without them).
    class ExampleOnPostgres(application_contract.ExampleApplicationTestCase):
        expected_factory_topic = "eventsourcing.postgres:PostgresFactory"

    result = ExampleOnPostgres("test_example_application").run()
    assert result.wasSuccessful(), result.errors + result.failures


def test_the_metnos_log_switches_to_postgres_by_environment_alone(metnos_home, postgres_process_env) -> None:
    log = EventLog()
    try:
        assert type(log.factory).__module__ == "eventsourcing.postgres"
        note = Note._create(Note.Written, id=uuid4(), text="hello", timestamp=datetime(2026, 11, 22, tzinfo=timezone.utc))
        log.save(note)
        again = log.repository.get(note.id)
        assert again.text == "hello"
        assert again.created_on == datetime(2026, 11, 22, tzinfo=timezone.utc)
    finally:
        log.close()
    assert os.environ["PERSISTENCE_MODULE"] == "eventsourcing.postgres"


def test_processes_starting_at_once_on_an_empty_database_all_open_the_log(metnos_home, postgres_env) -> None:
    # Each process makes the tables when it opens the log; made by several at once, PostgreSQL failed all but
    # one with "tuple concurrently updated" (a CI run's four `metnos ask` at once). Threads race the same way.
    openers = 6
    for _ in range(3):
        with fresh_database(postgres_env) as database:
            start, opened, failed = threading.Barrier(openers), [], []

            def open_log() -> None:
                start.wait()
                try:
                    opened.append(EventLog(env=database))
                except Exception as e:  # noqa: BLE001 - the failure is what the test reports
                    failed.append(repr(e))

            threads = [threading.Thread(target=open_log) for _ in range(openers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
            for log in opened:
                note = Note._create(Note.Written, id=uuid4(), text="hello", timestamp=datetime(2026, 11, 22, tzinfo=timezone.utc))
                log.save(note)
                log.close()
            assert failed == [], failed
            assert len(opened) == openers
