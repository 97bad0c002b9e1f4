"""Issue 17 item 5: one warm embedded model server shared by every command.

Real parts: the embedded model served by llama.cpp (xllamacpp) in a detached
child on 127.0.0.1, found through the state file in the runtime dir. Idle
times are seconds, and every test stops what it started, whatever happens.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metnos.adapters.cli import main
from metnos.mechanisms.llm import shared_server
from metnos.mechanisms.llm.messages import UserMessage
from metnos.mechanisms.llm.model_files import MODEL_FILENAME
from metnos.mechanisms.llm.router import LLMRouter
from metnos.settings.llm_tiers import settings_from_mapping
from metnos.settings.workspace import Workspace
from tests.support.embedded import embedded_model_or_skip

IDLE_S = 4.0
IDLE_S_FROM_ENV = float(os.environ.get(shared_server.ENV_IDLE) or 20)  # tests/conftest.py sets it


@pytest.fixture
def model() -> Path:
    return embedded_model_or_skip()


@pytest.fixture
def ws(metnos_home: Path, model: Path) -> Iterator[Workspace]:
    workspace = Workspace.from_env()
    workspace.runtime_dir.mkdir(parents=True, exist_ok=True)
    seen: set[int] = set()
    original = shared_server.announce

    def remembering(runtime_dir: Path, **kw):  # noqa: ANN003, ANN202
        seen.add(kw["pid"])
        return original(runtime_dir, **kw)

    shared_server.announce = remembering  # type: ignore[assignment]
    try:
        yield workspace
    finally:
        shared_server.announce = original  # type: ignore[assignment]
        shared_server.stop_announced(workspace.runtime_dir)
        for pid in seen:  # no server outlives its test
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def router(ws: Workspace, model: Path, idle_s: float | None = IDLE_S) -> LLMRouter:
    settings = settings_from_mapping({"llm": {"tiers": {"fast": {"provider": "embedded", "model_path": str(model),
                                                                  "max_tokens": 4}}}}, env={})
    return LLMRouter(settings, ws, env={}, idle_s=idle_s)


def announced(ws: Workspace) -> dict:
    return json.loads(shared_server.state_path(ws.runtime_dir).read_text())


def alive(pid: int) -> bool:
    return shared_server._alive(pid)


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not alive(pid)


def test_the_first_command_leaves_a_warm_server_the_next_uses_it_until_it_idles_out(ws: Workspace, model: Path) -> None:
    with router(ws, model) as first:
        reply = first.for_tier("fast").complete([UserMessage("Say hi.")], [], temperature=0)
        assert reply.usage.input_tokens
    state = announced(ws)
    pid, url = state["pid"], state["url"]
    assert alive(pid) and shared_server.healthy(url)  # outlived the command that started it
    assert state["model"] == str(model) and state["model_hash"] == shared_server.model_fingerprint(model)
    assert state["owner"] == "ask" and state["idle_s"] == IDLE_S and state["port"] == int(url.rsplit(":", 1)[1])

    with router(ws, model) as second:
        second.for_tier("fast").complete([UserMessage("Say hi.")], [], temperature=0)
        assert second._embedded[model] == url and not second._owned
    assert announced(ws)["pid"] == pid  # the same server, not a second one

    # Another model file is another server: this one is not offered for it.
    other = ws.runtime_dir / "other.gguf"
    other.write_bytes(b"GGUF" + b"\0" * 64)
    assert shared_server.find_running(ws.runtime_dir, other) is None
    # Nor is a server that loaded another chat template (an upgrade changed it).
    state_file = shared_server.state_path(ws.runtime_dir)
    saved = state_file.read_text()
    state_file.write_text(json.dumps({**json.loads(saved), "template_hash": "0" * 32}))
    assert shared_server.find_running(ws.runtime_dir, model) is None
    state_file.write_text(saved)

    # Used again just now, it stays up past its idle time measured from the start ...
    time.sleep(IDLE_S / 2)
    shared_server.touch(ws.runtime_dir)
    time.sleep(IDLE_S * 0.75)
    assert alive(pid)
    # ... and ends itself once nobody used it for idle_s, taking its announcement along.
    assert wait_gone(pid, IDLE_S + 30)
    assert not shared_server.state_path(ws.runtime_dir).exists()


def test_model_stop_ends_the_warm_server(ws: Workspace, model: Path, capsys) -> None:
    with router(ws, model, idle_s=600) as r:
        r.for_tier("fast")
    pid = announced(ws)["pid"]
    assert alive(pid)
    assert main(["model", "stop"]) == 0
    assert "stopped the model server" in capsys.readouterr().out
    assert wait_gone(pid, 15) and not shared_server.state_path(ws.runtime_dir).exists()
    assert main(["model", "stop"]) == 0
    assert "no model server running" in capsys.readouterr().out


def test_an_idle_time_of_zero_starts_and_stops_a_private_server(ws: Workspace, model: Path) -> None:
    with router(ws, model, idle_s=0) as r:
        r.for_tier("fast")
        server = r._owned[0]
        pid = server.pid
        assert alive(pid) and not shared_server.state_path(ws.runtime_dir).exists()
    assert wait_gone(pid, 15)


def test_a_stale_announcement_is_removed(ws: Workspace, model: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for pid in (dead.pid, os.getpid()):  # a dead process; a live one that is no model server
        shared_server.state_path(ws.runtime_dir).write_text(json.dumps({
            "url": "http://127.0.0.1:9", "pid": pid, "port": 9, "model": str(model),
            "model_hash": shared_server.model_fingerprint(model), "template_hash": shared_server.template_fingerprint(),
            "owner": "ask", "owner_pid": pid, "idle_s": 5}))
        assert shared_server.find_running(ws.runtime_dir, model) is None
        assert not shared_server.state_path(ws.runtime_dir).exists()
    assert main(["model", "stop"]) == 0  # nothing to stop, and no error


def test_the_daemon_keeps_a_warm_server_that_commands_use(ws: Workspace, model: Path, capsys) -> None:
    assert main(["init"]) == 0
    ws.models_dir.mkdir(parents=True, exist_ok=True)
    (ws.models_dir / MODEL_FILENAME).symlink_to(model)
    capsys.readouterr()
    assert main(["daemon", "--once", "--skip-birth", "--tick", "2"]) == 0
    started = json.loads(capsys.readouterr().out.splitlines()[0])
    state = announced(ws)
    assert started["model_url"] == state["url"] and state["owner"] == "daemon" and alive(state["pid"])
    assert state["idle_s"] == IDLE_S_FROM_ENV
    settings = settings_from_mapping({}, env={})  # no tiers configured: every tier is the embedded model
    with LLMRouter(settings, ws, env={}) as r:
        r.for_tier("wise")
        assert r._embedded[ws.models_dir / MODEL_FILENAME] == state["url"] and not r._owned


def test_the_daemon_without_a_model_says_so(ws: Workspace, capsys) -> None:
    assert main(["init"]) == 0
    capsys.readouterr()
    assert main(["daemon", "--once", "--skip-birth"]) == 0
    started = json.loads(capsys.readouterr().out.splitlines()[0])
    assert started["model"] == "no embedded model installed" and "model_url" not in started
    assert not shared_server.state_path(ws.runtime_dir).exists()
