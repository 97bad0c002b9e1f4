"""The service layer: one wiring for every way in (the import contracts are tests/unit/test_layers.py).

A turn asked from the command line (``services.turns.asked``, which boots and
wires the router itself) and the same turn asked through the daemon's host
(``DaemonHost.ask``, which keeps its runtime and router across turns) must be
the same turn, event for event, but for who asked: the wiring is one module,
so the settings, the catalogue, the tiers and the ports cannot drift apart.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from metnos.services import extensions, queries, turns, wiring
from metnos.services.host import DaemonHost
from tests.support.layouts import apply_layout
from tests.support.scripted_llm import ScriptedLLM, call, text

REQUEST = "what does my note say?"
NOTE = "back at seven\n"
ANSWER = "Your note says: back at seven."
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_WHEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?")
# What differs between two runs of one turn by nature: the clock, the ids, the durations.
_VARYING = re.compile(r"(_ms|_s|_at|^at|^timestamp|^started|^elapsed.*)$")


def _workspace(root: Path, monkeypatch: pytest.MonkeyPatch, initialised_workspace: Callable[[str], Path]) -> Path:
    """An initialised workspace under ``root``, made the process's own."""
    shutil.copytree(initialised_workspace("metnos_home"), root, symlinks=True, dirs_exist_ok=True)
    return apply_layout("metnos_home", root, monkeypatch, os.environ)


def _same_facts(value: Any, root: Path) -> Any:
    """``value`` with what varies from run to run by nature put aside: ids, times, durations, the folder."""
    if isinstance(value, dict):
        return {k: _same_facts(v, root) for k, v in value.items() if not _VARYING.search(k)}
    if isinstance(value, list):
        return [_same_facts(v, root) for v in value]
    if isinstance(value, str):
        return _WHEN.sub("<when>", _ID.sub("<id>", value.replace(str(root), "<root>")))
    return value


def _turn(turn_id: str) -> list[dict[str, Any]]:
    with wiring.boot(birth=False) as rt:
        return queries.turn_events(rt, turn_id)


def _facts(events: list[dict[str, Any]], root: Path) -> list[tuple[str, Any]]:
    return [(e["type"], _same_facts({k: v for k, v in e["state"].items() if k != "channel"}, root)) for e in events]


def test_a_turn_asked_on_the_command_line_and_through_the_daemon_is_the_same_turn_but_for_its_channel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, initialised_workspace: Callable[[str], Path]) -> None:
    script = [call("read_files", {"paths": ["~/note.txt"]}), text(ANSWER)]
    asked: list[dict[str, Any]] = []

    def approver(step: int, executor: str, args: dict[str, Any], reason: str) -> tuple[bool, str]:
        asked.append({"step": step, "executor": executor})
        return False, "test:no"

    cli_root = tmp_path / "a"  # the same length as the other: sizes of what names a path match
    (_workspace(cli_root, monkeypatch, initialised_workspace) / "note.txt").write_text(NOTE)
    with ScriptedLLM(list(script)) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        on_cli = turns.asked(REQUEST, approver=approver).outcome
        cli_sent = [r.body for r in llm.requests]
    assert on_cli.status == "answered" and on_cli.answer == ANSWER, on_cli
    cli_events = _turn(on_cli.turn_id)

    daemon_root = tmp_path / "b"
    (_workspace(daemon_root, monkeypatch, initialised_workspace) / "note.txt").write_text(NOTE)
    with ScriptedLLM(list(script)) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        with wiring.boot() as rt:
            host = DaemonHost(rt, env=os.environ)
            try:
                on_daemon = host.ask(REQUEST, approver=approver, channel="http")
            finally:
                host.close()
        daemon_sent = [r.body for r in llm.requests]
    assert on_daemon.status == "answered" and on_daemon.answer == ANSWER, on_daemon
    daemon_events = _turn(on_daemon.turn_id)

    started = [next(e["state"] for e in events if e["type"] == "TurnStarted") for events in (cli_events, daemon_events)]
    assert [s["channel"] for s in started] == ["cli", "http"]
    assert len(cli_events) == len(daemon_events) > 4
    assert _facts(cli_events, cli_root) == _facts(daemon_events, daemon_root)
    # The model was asked the same questions, in the same words, with the same tools.
    assert _same_facts(cli_sent, cli_root) == _same_facts(daemon_sent, daemon_root)
    assert asked == []  # reading asks nobody


def test_the_wiring_reads_the_model_for_one_command_and_checks_it_is_there_before_any_boot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, initialised_workspace: Callable[[str], Path]) -> None:
    from metnos.mechanisms.llm.errors import ModelNotInstalled

    _workspace(tmp_path, monkeypatch, initialised_workspace)
    monkeypatch.delenv("METNOS_LLM_URL", raising=False)
    env = wiring.turn_env("1.5b")
    assert env["METNOS_MODEL"] == "1.5b" and wiring.turn_env().get("METNOS_MODEL") == os.environ.get("METNOS_MODEL")
    with pytest.raises(ModelNotInstalled, match="1.5b") as refused:
        turns.asked(REQUEST, approver=lambda *_: (False, "test:no"), model="1.5b")
    assert "metnos model install" in str(refused.value)
    # Refused before the boot: nothing was recorded.
    with wiring.boot(birth=False) as rt:
        assert queries.turn_rows(queries.turns_state(rt)) == []


@pytest.mark.parametrize(("names", "hook"), [
    ((extensions.HTTP_MODULE,), "start_http"),
    (extensions.CHANNEL_MODULES, "channel"),
    (extensions.MOUNT_MODULES, "mount"),
    ((extensions.MCP_STDIO_MODULE,), "serve_stdio"),
])
def test_every_way_in_the_services_start_by_name_is_there_with_its_hook(names: tuple[str, ...], hook: str) -> None:
    for name in names:
        assert name.startswith("metnos.adapters."), name
        assert callable(getattr(importlib.import_module(name), hook)), f"{name} has no {hook}()"
