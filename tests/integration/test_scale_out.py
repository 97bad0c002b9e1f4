"""Issue 36 item 3: two daemons and several CLI processes, each in its own home, on one PostgreSQL log.

A real PostgreSQL (tests/support/postgres.py), a fresh database for the
module, two ``metnos daemon`` processes ticking every fifth of a second on a
clock both read from one file: a schedule's slot fires once across them; four
``metnos ask`` processes at once lose and duplicate nothing, and every home's
views catch up with all of them; a daemon killed (SIGKILL) while its turn
waits for an approval leaves the turn open for the others, and its restart
closes it as abandoned, once.
"""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest

from domain.due import stamp
from metnos.runtime.scheduler.clock import CLOCK_FILE_ENV
from tests.support.cli_process import Home, spawn, wait_for
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.support.shared_log import Daemon, fresh_database, homes_on_one_log, kind, log_rows

pytestmark = [pytest.mark.postgres, pytest.mark.bwrap]

WRITERS = 4
SLOT = stamp(datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc))


class SharedLog:
    def __init__(self, homes: list[Home], env: dict[str, str], clock_file: Path, llm: ScriptedLLM) -> None:
        self.homes, self.env, self.clock_file, self.llm = homes, env, clock_file, llm
        self.daemons: list[Daemon] = []

    def home_env(self, number: int) -> dict[str, str]:
        return self.homes[number].env(**self.env)

    def rows(self, number: int = 1) -> list[dict[str, Any]]:
        return log_rows(self.homes[number], self.home_env(number))

    def daemon(self, number: int) -> Daemon:
        started = Daemon(self.homes[number], self.home_env(number))
        self.daemons.append(started)
        return started


@pytest.fixture(scope="module")
def shared(postgres_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedLog]:
    root = tmp_path_factory.mktemp("scale-out")
    clock_file = root / "now"
    clock_file.write_text("2026-11-20T07:58:00Z")
    with fresh_database(postgres_env) as database, ScriptedLLM() as llm:
        env = {**database, CLOCK_FILE_ENV: str(clock_file), "METNOS_LLM_URL": llm.url, "METNOS_LLM_MODEL": "scripted"}
        homes = homes_on_one_log(root, 2, env)
        log = SharedLog(homes, env, clock_file, llm)
        try:
            yield log
        finally:
            for daemon in log.daemons:
                daemon.stop()


def test_a_schedule_fires_once_across_two_daemons(shared: SharedLog) -> None:
    # The firing waits on a page held open, so that the other daemon ticks many times while it runs: without
    # one lock across the log it would take the open firing for one cut short by a crash, and run it again.
    page = SlowPage()
    try:
        for home in shared.homes:
            (home.metnos_home / "config" / "config.toml").write_text(f'[network]\nallow = ["127.0.0.1:{page.port}"]\n')
        made = shared.homes[0].run("schedule", "add", "--executor", "get_urls", "--args", orjson.dumps({"urls": [page.url]}).decode(),
                                   "--cron", "*/5 * * * *", "--channel", "none", **shared.env)
        assert made.returncode == 0, made.stderr
        sid = orjson.loads(made.stdout)["schedule_id"]
        first, second = shared.daemon(0), shared.daemon(1)
        shared.clock_file.write_text("2026-11-20T08:00:05Z")
        assert page.arrived.wait(120), "the firing never reached the page"
        # The daemon firing waits on the page; the other one ticks meanwhile.
        seen = len(first.ticks()) + len(second.ticks())
        wait_for(lambda: len(first.ticks()) + len(second.ticks()) >= seen + 3, timeout=60, what="the other daemon's ticks")
        page.release.set()
        for daemon in (first, second):
            seen = len(daemon.ticks())
            daemon.wait_for(lambda line, d=daemon, n=seen: len(d.ticks()) >= n + 3, timeout=120)
    finally:
        page.close()
    assert page.requests == 1, [t for d in (first, second) for t in d.ticks() if t.get('firings') or t.get('errors') or t.get('error')]
    # A tick line holds the firings, or the error that tick ended with (the daemon's loop goes on).
    fired = [(f["schedule_id"], f["slot"], f["attempt"], f["kind"]) for d in (first, second) for t in d.ticks() for f in t.get("firings", ())]
    errors = [t["error"] for d in (first, second) for t in d.ticks() if "error" in t]
    assert [f for f in fired if f[0] == sid] == [(sid, SLOT, 1, "ok")], errors
    started = [r for r in shared.rows() if r["aggregate_id"] == sid and kind(r) == "FiringStarted"]
    assert [(r["state"]["slot"], r["state"]["attempt"]) for r in started] == [(SLOT, 1)]
    # Every slot of every schedule (the builtin jobs too) was started once.
    every = Counter((r["aggregate_id"], r["state"]["slot"], r["state"]["attempt"]) for r in shared.rows() if kind(r) == "FiringStarted")
    assert set(every.values()) <= {1}, every


def test_concurrent_turns_from_several_processes_lose_and_duplicate_nothing(shared: SharedLog) -> None:
    before = shared.rows()
    # One answer for any of the requests (a number in it would have to come from a step's result).
    shared.llm.add(*[text("Done, as asked.") for _ in range(WRITERS)])
    asks = [spawn(["ask", f"request {n}"], shared.home_env(n % 2), cwd=shared.homes[n % 2].root) for n in range(WRITERS)]
    for proc in asks:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    rows = shared.rows()
    ids = [r["id"] for r in rows]
    assert ids == sorted(set(ids)), "a notification id repeated or out of order"
    assert rows[: len(before)] == before, "what was in the log before changed"
    new = rows[len(before):]
    turns = {r["aggregate_id"] for r in new if kind(r) == "TurnStarted"}
    assert len(turns) == WRITERS
    assert Counter(kind(r) for r in new if r["aggregate_id"] in turns)["TurnAnswered"] == WRITERS
    for aggregate in {r["aggregate_id"] for r in new}:
        versions = [r["aggregate_version"] for r in rows if r["aggregate_id"] == aggregate]
        assert versions == list(range(1, len(versions) + 1)), f"{aggregate} has versions {versions}"
    # Each home's turn view caught up with every turn, whichever process wrote it.
    for number in (0, 1):
        listed = shared.homes[number].run("turns", "list", "--json", **shared.env)
        assert turns <= {t["id"] for t in orjson.loads(listed.stdout)}


def test_an_approval_asked_through_one_daemon_is_answered_through_the_other(shared: SharedLog) -> None:
    asking, answering = shared.daemons[1], shared.daemons[0]
    target = shared.homes[1].user / "approved.txt"
    shared.llm.add(call("write_files", {"files": [{"path": str(target), "content": "hello"}]}), text("I wrote the file."))
    result: dict[str, Any] = {}
    with asking.client() as client_b, answering.client() as client_a:
        turn = threading.Thread(target=lambda: result.update(client_b.post("/api/ask", json={"text": "write approved.txt"}).json()))
        turn.start()
        [question] = wait_for(lambda: client_a.get("/api/approvals").json(), timeout=120, what="the question to reach the other daemon")
        assert question["executor"] == "write_files" and question["args"]["files"][0]["path"] == str(target)
        assert not target.exists()
        assert client_a.post(f"/api/approvals/{question['id']}", json={"approve": True}).json()["approved"] is True
        turn.join(timeout=120)
        assert result["status"] == "answered", result
        assert target.read_text() == "hello"
        # Answered once: neither daemon lists it, neither takes a second answer.
        assert client_a.get("/api/approvals").json() == [] and client_b.get("/api/approvals").json() == []
        for client in (client_a, client_b):
            assert client.post(f"/api/approvals/{question['id']}", json={"approve": False}).status_code == 404
        # The other daemon's view of the turn catches up through the log's subscription (docs/scale-out.md, projection lag).
        shown = wait_for(lambda: (r := client_a.get(f"/api/turns/{result['turn_id']}")).status_code == 200 and r.json(),
                         timeout=60, what="the turn to reach the other daemon's view")
    [answered] = [e["state"] for e in shown["events"] if e["type"] == "ApprovalAnswered"]
    assert answered["approved"] is True and answered["by"] == "http:user"
    recorded = [kind(r) for r in shared.rows() if r["aggregate_id"] == str(UUID(question["id"]))]
    assert recorded == ["ApprovalRequested", "ApprovalDecided"]


def test_a_daemon_killed_mid_turn_is_closed_once_by_its_restart(shared: SharedLog) -> None:
    first = shared.daemons[0]
    target = shared.homes[0].user / "never.txt"
    shared.llm.add(call("write_files", {"files": [{"path": str(target), "content": "no"}]}), text("unused"))
    with first.client() as client:
        threading.Thread(target=lambda: _ask_quietly(client), daemon=True).start()
        wait_for(lambda: client.get("/api/approvals").json(), timeout=120, what="the approval to be pending")
    first.kill()
    # The turn's events up to the question were committed before the daemon waited.
    [turn] = {r["aggregate_id"] for r in shared.rows() if kind(r) == "TurnStarted"} - _closed(shared.rows())
    second = shared.daemons[1]
    seen = len(second.ticks())
    second.wait_for(lambda line: len(second.ticks()) >= seen + 3, timeout=30)
    assert turn not in _closed(shared.rows()), "another daemon closed a turn whose writer it cannot judge"

    restarted = shared.daemon(0)
    assert restarted.started["abandoned"] == [turn]
    rows = shared.rows()
    assert [kind(r) for r in rows if r["aggregate_id"] == turn].count("TurnAbandoned") == 1
    assert not target.exists()
    listed = shared.homes[1].run("turns", "list", "--json", **shared.env)
    assert {t["id"]: t["status"] for t in orjson.loads(listed.stdout)}[turn] == "abandoned"


class SlowPage:
    """A page on 127.0.0.1 that holds each request until released; counts them."""

    def __init__(self) -> None:
        self.requests = 0
        self.arrived, self.release = threading.Event(), threading.Event()
        page = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                page.requests += 1
                page.arrived.set()
                page.release.wait(60)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "5")
                self.end_headers()
                self.wfile.write(b"hello")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/slow"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _ask_quietly(client: Any) -> None:
    try:
        client.post("/api/ask", json={"text": "write never.txt"})
    except Exception:  # noqa: BLE001 - the daemon is killed under this request
        pass


def _closed(rows: list[dict[str, Any]]) -> set[str]:
    return {r["aggregate_id"] for r in rows if kind(r) in ("TurnAnswered", "TurnFailed", "TurnAbandoned")}
