"""Item 6 of issue 17: `--version`, the model choice at the CLI, and progress lines off a terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import metnos
from metnos.adapters.cli import main
from tests.support.scripted_llm import ScriptedLLM, call, text


def test_version_prints_the_package_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "metnos", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"metnos {metnos.__version__}"


def test_off_a_terminal_each_phase_is_one_line_on_stderr(home: Path, capsys, monkeypatch) -> None:
    with ScriptedLLM([call("get_now", {}), text("It is noon.")], dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        capsys.readouterr()
        code = main(["ask", "what time is it", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and orjson.loads(out)["status"] == "answered"
    lines = err.splitlines()
    assert "metnos: thinking (round 1) …" in lines
    assert "metnos: step 1: get_now" in lines
    assert "metnos: thinking (round 2) …" in lines
    assert lines.index("metnos: step 1: get_now") < lines.index("metnos: thinking (round 2) …")


def test_ask_with_a_model_not_installed_names_the_install_command(home: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("METNOS_LLM_URL", raising=False)
    capsys.readouterr()
    code = main(["ask", "what time is it", "--model", "0.5b"])
    out, err = capsys.readouterr()
    said = out + err
    assert code == 2
    # The size that is not the default (the 1.5B is) is named with its flag.
    assert "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" in said and "metnos model install --size 0.5b" in said
    assert "Traceback" not in said


def test_ask_with_a_path_that_is_no_gguf_is_one_line(home: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("METNOS_LLM_URL", raising=False)
    capsys.readouterr()
    code = main(["ask", "hi", "--model", "7b"])
    err = capsys.readouterr().err
    assert code == 2 and "neither a size" in err and "Traceback" not in err


@pytest.mark.parametrize("size", ["0.5b", "1.5b"])
def test_model_status_reports_the_chosen_size(home: Path, capsys, size: str) -> None:
    capsys.readouterr()
    code = main(["model", "status", "--size", size])
    out = capsys.readouterr().out
    assert code == 1  # nothing installed in a fresh home
    assert f"qwen2.5-coder-{size}-instruct-q4_k_m.gguf" in out
