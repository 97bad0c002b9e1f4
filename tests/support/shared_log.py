"""Several Metnos workspaces on one PostgreSQL log: a database of their own, homes, daemons as real processes.

Each test module gets a fresh database on the server of tests/support/postgres.py
(CI's or a throwaway cluster), so that its log starts empty whatever else
the server holds.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import orjson

from tests.support.cli_process import Home, run, spawn

# The daemons of these tests: births and the embedded model skipped, a tick every fifth of a second.
FLAGS = ("--skip-birth", "--no-model", "--tick", "0.2")


@contextmanager
def fresh_database(server: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """A new, empty database on ``server`` (its POSTGRES_* variables), dropped afterwards; the variables naming it."""
    import psycopg  # noqa: PLC0415 - the postgres extra, present only where these tests run

    name = f"metnos_{uuid4().hex[:12]}"
    admin = dict(host=server["POSTGRES_HOST"], port=server["POSTGRES_PORT"], user=server["POSTGRES_USER"],
                 password=server.get("POSTGRES_PASSWORD", ""), dbname=server.get("POSTGRES_DBNAME", "postgres"))
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {**server, "POSTGRES_DBNAME": name, "PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_POOL_SIZE": "4"}
    finally:
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def homes_on_one_log(root: Path, count: int, database: Mapping[str, str]) -> list[Home]:
    """``count`` homes writing the log in ``database``: the first made by ``metnos init``, the others copies of it
    (the same instance on other machines: its keys, views folded so far, nothing running)."""
    first = Home(root / "home-0")
    first.user.mkdir(parents=True)
    done = first.run("init", **database)
    assert done.returncode == 0, done.stderr
    homes = [first]
    for number in range(1, count):
        other = Home(root / f"home-{number}")
        shutil.copytree(first.metnos_home, other.metnos_home, ignore=shutil.ignore_patterns(".runtime"))
        other.user.mkdir(parents=True)
        homes.append(other)
    return homes


class Daemon:
    """``metnos daemon`` in one home, its JSON lines read as they come (a tick a line)."""

    def __init__(self, home: Home, env: Mapping[str, str], flags: tuple[str, ...] = FLAGS) -> None:
        self.home, self.env = home, dict(env)
        self.proc = spawn(["daemon", "--http", "127.0.0.1:0", *flags], self.env, cwd=home.root)
        self.lines: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()
        started = self.wait_for(lambda line: line.get("event") == "started", timeout=120)
        self.url = started.get("http")
        self.started = started
        token = run(["daemon", "token"], self.env)
        assert token.returncode == 0, token.stderr
        self.token = token.stdout.strip()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(orjson.loads(line))

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if predicate(line):
                    return line
            if self.proc.poll() is not None:
                raise AssertionError(f"the daemon in {self.home.root} exited ({self.proc.returncode}): {self.proc.stderr.read()}")
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s; the daemon in {self.home.root} said last: {self.lines[-3:]}")

    def ticks(self) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line.get("event") == "tick"]

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=120)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def log_rows(home: Home, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every event of the shared log, as ``metnos events --json`` in ``home`` prints it."""
    done = run(["events", "--json"], env, cwd=home.root)
    assert done.returncode == 0, done.stderr
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def kind(row: dict[str, Any]) -> str:
    return row["topic"].rsplit(".", 1)[-1].rsplit(":", 1)[-1]
