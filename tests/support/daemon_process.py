"""``metnos daemon`` as a real process serving HTTP on a free loopback port, for the daemon's tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.support.cli_process import metnos_env, run, spawn, wait_for
from tests.support.layouts import LAYOUTS, layout_env
from tests.support.scripted_llm import ScriptedLLM
from tests.support.workspace_template import initialise


@dataclass
class RunningDaemon:
    proc: subprocess.Popen
    url: str
    token: str
    env: dict[str, str]

    def client(self, *, token: str | None = "default", **kw: Any) -> httpx.Client:
        headers = {} if token is None else {"Authorization": f"Bearer {self.token if token == 'default' else token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", 120), **kw)

    def last_event_id(self) -> int:
        """The log's last notification id, read by a separate ``metnos events`` process."""
        done = run(["events", "--json"], self.env)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        return orjson.loads(lines[-1])["id"] if lines else 0

    def stop(self) -> tuple[str, str]:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.communicate()


# What most tests start: the births and the embedded model skipped, one tick an hour.
QUICK = ("--skip-birth", "--no-model", "--tick", "3600")


def start_daemon(env: Mapping[str, str], flags: tuple[str, ...] = QUICK) -> RunningDaemon:
    """Start the daemon on a free loopback port (first tick done, HTTP up) and read its URL from the started line."""
    env = dict(env)
    proc = spawn(["daemon", "--http", "127.0.0.1:0", *flags], env)
    lines: list[dict[str, Any]] = []

    def first_tick() -> bool:
        line = proc.stdout.readline()
        if line:
            lines.append(orjson.loads(line))
        return any(r.get("event") == "tick" for r in lines)

    wait_for(first_tick, timeout=120, what="the daemon's first tick", proc=proc)
    started = next(r for r in lines if r.get("event") == "started")
    token = run(["daemon", "token"], env)
    assert token.returncode == 0, token.stderr
    return RunningDaemon(proc=proc, url=started["http"], token=token.stdout.strip(), env=env)


@contextmanager
def daemon_in_layout(layout: str, root: Path, llm_url: str) -> Iterator[RunningDaemon]:
    """A fresh workspace in ``layout`` under ``root`` (``metnos init``), its daemon asking the LLM at ``llm_url``."""
    env = metnos_env(layout_env(layout, root, os.environ), METNOS_LLM_URL=llm_url, METNOS_LLM_MODEL="scripted")
    initialise(env)
    running = start_daemon(env)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def daemon_llm() -> Iterator[ScriptedLLM]:
    """One scripted LLM server for a module's daemons; each test adds the steps it needs."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="module", params=LAYOUTS)
def daemon(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, daemon_llm: ScriptedLLM) -> Iterator[RunningDaemon]:
    """A running daemon on a fresh workspace, in each layout (a module imports this fixture)."""
    with daemon_in_layout(request.param, tmp_path_factory.mktemp("daemon"), daemon_llm.url) as running:
        yield running
