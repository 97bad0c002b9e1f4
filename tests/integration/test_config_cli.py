"""Issue 21 item 5 through the CLI, in both layouts: ``metnos config check|show``, every command
refusing a wrong key at its start, ``[turn]`` caps governing a real turn, ``[daemon] http`` where the daemon listens."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import httpx
import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.support.cli_process import metnos_env, spawn, wait_for
from tests.support.scripted_llm import ScriptedLLM, call, text


def config_file() -> Path:
    return Workspace.from_env().config_file


def test_check_and_every_command_name_the_wrong_key(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check"]) == 0
    assert "valid (8 sections" in capsys.readouterr().out
    config_file().write_text("[turn]\ncap_step = 3\n")
    for argv in (["config", "check"], ["config", "show"], ["turns", "list"], ["ask", "what time is it?", "--no"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"{config_file()}: [turn] cap_step: unknown key" in err and "did you mean cap_steps?" in err
        assert "Traceback" not in err


def test_show_says_where_each_turn_setting_comes_from(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    config_file().write_text("[turn]\ncap_steps = 4\n[network]\nallow = [\"example.org\"]\n")
    monkeypatch.setenv("METNOS_CAP_SAME_EXECUTOR", "3")
    assert main(["config", "show", "--json"]) == 0
    shown = orjson.loads(capsys.readouterr().out)["sections"]
    assert shown["turn"]["cap_steps"] == {"value": 4, "from": "config"}
    assert shown["turn"]["cap_same_executor"] == {"value": 3, "from": "environment"}
    assert shown["turn"]["pool_size"]["from"] == "default"
    assert shown["network"]["allow"] == ["example.org"]


@pytest.mark.bwrap
def test_the_turn_caps_of_config_toml_govern_a_real_turn(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    config_file().write_text("[turn]\ncap_steps = 1\n")
    # A request that acts keeps its tools after the time, so the second call meets the cap.
    script = [call("get_now", {}), call("get_now", {"timezone": "UTC"}),
              call("write_files", {"files": [{"path": "~/t.txt", "content": "{{step2.content}}"}]}), text("done")]
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        assert main(["ask", "what time is it, twice? write it to ~/t.txt", "--json"]) == 1
        capped = orjson.loads(capsys.readouterr().out)
    assert capped["status"] == "failed" and capped["failure"]["kind"] == "cap_steps", capped
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_CAP_STEPS", "5")  # the variable wins over the file
        assert main(["ask", "what time is it, twice? write it to ~/t.txt", "--json", "--yes"]) == 0
        assert orjson.loads(capsys.readouterr().out)["status"] == "answered"


def test_the_daemon_listens_where_config_toml_says(home: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config_file().write_text(f"[daemon]\nhttp = \"127.0.0.1:{port}\"\napproval_timeout_s = 30\n")
    proc = spawn(["daemon", "--skip-birth", "--no-model", "--tick", "3600"], metnos_env(os.environ))
    try:
        started = orjson.loads(wait_for(proc.stdout.readline, timeout=120, what="the started line", proc=proc))
        assert started["http"] == f"http://127.0.0.1:{port}"
        assert httpx.get(started["http"] + "/api/turns").status_code == 401
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
