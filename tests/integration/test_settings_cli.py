"""Issue 31 item 1 through the CLI: ``metnos config show`` says where each value came from, secrets
never shown; every command reads its settings once (config.toml opened once, whatever the command)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.support.scripted_llm import ScriptedLLM, text


def config_file() -> Path:
    return Workspace.from_env().config_file


def test_show_names_each_source(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    config_file().write_text("[turn]\ncap_steps = 4\n[daemon]\napproval_timeout_s = 30\n")
    monkeypatch.setenv("METNOS_CAP_SAME_EXECUTOR", "3")
    monkeypatch.setenv("CIPHER_KEY", "a-cipher-secret")
    capsys.readouterr()
    assert main(["--debug", "config", "show", "--json"]) == 0
    out = capsys.readouterr().out
    shown = orjson.loads(out)["settings"]
    assert shown["turn.cap_steps"] == {"value": 4, "from": str(config_file())}
    assert shown["turn.cap_same_executor"] == {"value": 3, "from": "METNOS_CAP_SAME_EXECUTOR"}
    assert shown["turn.pool_size"] == {"value": 12, "from": "default"}
    assert shown["daemon.approval_timeout_s"] == {"value": 30.0, "from": str(config_file())}
    assert shown["process.debug"] == {"value": True, "from": "--debug"}
    assert shown["log.cipher_key"] == {"value": "(set, hidden)", "from": "CIPHER_KEY"}
    assert "a-cipher-secret" not in out
    assert main(["config", "show"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"cap_steps = 4  # {config_file()}" in lines and "cap_same_executor = 3  # METNOS_CAP_SAME_EXECUTOR" in lines
    assert "# each value's source; the first of these that sets it wins: flag > environment > config.toml > default" in lines


@pytest.fixture
def config_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every time any code opens a config.toml as text, by the one way Metnos reads it."""
    reads: list[Path] = []
    real = Path.read_text

    def counted(self: Path, *args: object, **kwargs: object) -> str:
        if self.name == "config.toml":
            reads.append(self)
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    return reads


@pytest.mark.parametrize("argv", [["config", "show"], ["config", "check"], ["turns", "list"], ["schedule", "list"]])
def test_a_command_reads_config_toml_once(home: Path, argv: list[str], config_reads: list[Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    config_file().write_text("[turn]\ncap_steps = 9\n[network]\nallow = [\"example.org\"]\n")
    config_reads.clear()
    assert main(argv) == 0
    assert config_reads == [config_file()]


@pytest.mark.bwrap
def test_a_turn_reads_config_toml_once(home: Path, config_reads: list[Path], capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    config_file().write_text("[turn]\ncap_steps = 9\n")
    with ScriptedLLM([text("hello")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        config_reads.clear()
        assert main(["ask", "say hello", "--json", "--set", "fillers=false"]) == 0
    assert config_reads == [config_file()]
    assert orjson.loads(capsys.readouterr().out)["status"] == "answered"
