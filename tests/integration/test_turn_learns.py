"""A live turn with piping teaches the mnestome, in its last transaction."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from metnos.cli import main
from tests.support.scripted_llm import ScriptedLLM, call, text


@pytest.fixture
def home(metnos_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user_home = tmp_path / "user"
    (user_home / "docs").mkdir(parents=True)
    for name in ("a.md", "b.md", "c.txt"):
        (user_home / "docs" / name).write_text(name)
    monkeypatch.setenv("HOME", str(user_home))
    assert main(["init"]) == 0
    return user_home


def test_piping_in_a_turn_creates_then_reinforces_a_mnest(home: Path, capsys, monkeypatch) -> None:
    script = [
        call("find_files", {"base_path": "~/docs", "pattern": "*.md"}),
        call("describe_entries", {"from_step": 1}),
        text("a.md and b.md"),
    ]
    for _ in range(2):
        with ScriptedLLM(list(script)) as llm:
            monkeypatch.setenv("METNOS_LLM_URL", llm.url)
            monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
            assert main(["ask", "find the markdown files in docs and describe them"]) == 0
    capsys.readouterr()
    assert main(["mnestome", "list", "--json"]) == 0
    mnests = orjson.loads(capsys.readouterr().out)
    pair = [m for m in mnests if m["src_executor"] == "find_files" and m["dst_executor"] == "describe_entries"]
    assert len(pair) == 1
    assert pair[0]["uses"] == 2 and 0.15 < pair[0]["weight"] <= 0.30
    # Replay still replays clean: mnest events live on their own aggregates.
    assert main(["replay", "--all"]) == 0
