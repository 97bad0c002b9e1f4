"""Issue 30 item 4 on every way in: under ``[runtime] autonomy = "full"`` a delete still asks.

seeds/000: an executor with side effects that is not idempotent "asks for
confirmation even within the Full autonomy level". Each channel is run as its
own tests run it (a real daemon over HTTP, the Telegram channel against the
fake Bot API, ``metnos mcp serve`` over stdio driven by the official SDK),
with the scripted LLM and bubblewrap; the CLI's are in test_autonomy.py. In
each, the file is still there while the question waits, is deleted only
after a yes, and is kept after a no.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from metnos.settings.workspace import Workspace
from tests.integration.test_daemon_http import ask_and_wait_for_approval, user_home
from tests.integration.test_mcp_stdio import _invocations
from tests.integration.test_telegram_channel import ALLOWED, _buttons, _channel, _events, bot  # noqa: F401 - bot is a fixture
from tests.support.cli_process import metnos_env
from tests.support.daemon_process import RunningDaemon, daemon, daemon_llm  # noqa: F401 - fixtures
from tests.support.fake_telegram import FakeBotAPI
from tests.support.scripted_llm import ScriptedLLM, call, text

pytestmark = pytest.mark.bwrap

FULL = '\n[runtime]\nautonomy = "full"\n'


def _set_full(workspace: Workspace) -> None:
    config = workspace.config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text((config.read_text() if config.exists() else "") + FULL)


def _delete(path: Path) -> dict[str, Any]:
    return {"paths": [str(path)]}


# The daemon's HTTP API (and its dashboard, which answers through the same broker) --------------

@pytest.mark.parametrize("approve", [True, False])
def test_daemon_api_under_full_a_delete_waits_for_the_answer(daemon: RunningDaemon, daemon_llm: ScriptedLLM, approve: bool) -> None:
    workspace = Workspace.from_env(daemon.env)
    saved = workspace.config_file.read_text() if workspace.config_file.exists() else None
    _set_full(workspace)
    victim = user_home(daemon) / f"precious-{approve}.txt"
    victim.write_text("keep me")
    daemon_llm.add(call("delete_files", _delete(victim)), text("Done."))
    result: dict = {}
    try:
        with daemon.client() as client:
            asking, pending = ask_and_wait_for_approval(client, f"delete {victim.name}", result)
            assert pending[0]["executor"] == "delete_files" and pending[0]["reason"].endswith("even at autonomy full")
            assert victim.exists()  # nothing deleted while the question waits
            client.post(f"/api/approvals/{pending[0]['id']}", json={"approve": approve})
            asking.join(timeout=60)
            events = client.get(f"/api/turns/{result['turn_id']}").json()["events"]
    finally:
        if saved is None:
            workspace.config_file.unlink()
        else:
            workspace.config_file.write_text(saved)
    assert victim.exists() is not approve, result
    started = next(e["state"] for e in events if e["type"] == "TurnStarted")
    assert started["autonomy"] == "full" and started["channel"] == "http"
    [answered] = [e["state"] for e in events if e["type"] == "ApprovalAnswered"]
    assert (answered["approved"], answered["by"]) == (approve, "http:user")
    assert any(e["type"] == "StepInvoked" for e in events) is approve
    assert result["status"] == ("answered" if approve else "refused"), result


# Telegram --------------------------------------------------------------------------------------

@pytest.mark.parametrize("approve", [True, False])
def test_telegram_under_full_a_delete_waits_for_the_button(bot: FakeBotAPI, home: Path, monkeypatch: pytest.MonkeyPatch, approve: bool) -> None:  # noqa: F811
    victim = home / "precious.txt"
    victim.write_text("keep me")
    with ScriptedLLM([call("delete_files", _delete(victim)), text("I deleted precious.txt.")]) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120)
        _set_full(runtime.workspace)
        try:
            bot.user_says(ALLOWED, "delete precious.txt")
            question = bot.wait_for("sendMessage", lambda p: "reply_markup" in p)
            assert "delete_files" in question.params["text"] and "even at autonomy full" in question.params["text"]
            assert victim.exists()  # nothing deleted before the press
            yes, no = _buttons(question.params)
            bot.press(question.result, (yes if approve else no)["callback_data"])
            bot.wait_for("sendMessage", lambda p: "reply_markup" not in p and p["chat_id"] == ALLOWED)
        finally:
            channel.stop()
    runtime.refresh()
    events = _events(runtime)
    assert victim.exists() is not approve
    [started] = [e for name, e in events if name == "TurnStarted"]
    assert started.autonomy == "full" and started.channel == "telegram"
    [answered] = [e for name, e in events if name == "ApprovalAnswered"]
    assert (answered.approved, answered.by) == (approve, "telegram:button")
    assert bool([e for name, e in events if name == "InvocationRequested" and e.executor == "delete_files"]) is approve
    runtime.close()


# MCP -------------------------------------------------------------------------------------------

def _mcp_env() -> dict[str, str]:
    env = metnos_env()
    env.pop("METNOS_SANDBOX", None)
    return env


def _server(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "metnos", "mcp", "serve"], env=env, cwd=env["HOME"])


def test_mcp_under_full_a_delete_runs_only_after_the_elicitation_says_yes(home: Path) -> None:
    env = _mcp_env()
    _set_full(Workspace.from_env(env))
    kept, deleted = home / "kept.txt", home / "deleted.txt"
    for f in (kept, deleted):
        f.write_text("keep me")
    asked: list[tuple[str, bool]] = []
    lock = threading.Lock()

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        target = kept if kept.name in params.message else deleted
        with lock:
            asked.append((target.name, target.exists()))  # the file, while the question waits
        return types.ElicitResult(action="accept", content={"approve": target is deleted})

    async def session() -> tuple[Any, Any]:
        async with Client(_server(env), elicitation_callback=elicit) as client:
            no = await client.call_tool("delete_files", _delete(kept))
            yes = await client.call_tool("delete_files", _delete(deleted))
        return no, yes

    no, yes = asyncio.run(session())
    assert asked == [("kept.txt", True), ("deleted.txt", True)]
    assert no.is_error is True and no.structured_content["error_class"] == "NotApproved", no.structured_content
    assert yes.is_error is False, yes.structured_content
    assert kept.exists() and not deleted.exists()
    deletes = [events for events in _invocations(env).values() if events[0]["executor"] == "delete_files"]
    ran = [events for events in deletes if "InvocationCompleted" in [e["type"] for e in events]]
    refused = [events for events in deletes if events[-1]["type"] == "InvocationRefused"]
    assert len(ran) == 1, deletes
    assert ran[0][0]["caller"]["approved_by"] == "mcp:elicitation" and ran[0][0]["autonomy"] == "full"
    assert len(refused) == 1 and refused[0][-1]["kind"] == "NotApproved" and refused[0][0]["autonomy"] == "full"
    assert refused[0][-1]["error"]["verdict"]["reason"].endswith("even at autonomy full")


def test_mcp_under_read_only_lists_no_side_effect_and_asks_nothing(home: Path) -> None:
    """The level config.toml sets holds for an MCP client too: read_only only looks."""
    env = _mcp_env()
    workspace = Workspace.from_env(env)
    workspace.config_file.parent.mkdir(parents=True, exist_ok=True)
    workspace.config_file.write_text('[runtime]\nautonomy = "read_only"\n')
    victim = home / "precious.txt"
    victim.write_text("keep me")
    asked: list[str] = []

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def session() -> tuple[Any, Any]:
        async with Client(_server(env), elicitation_callback=elicit) as client:
            return await client.list_tools(), await client.call_tool("delete_files", _delete(victim))

    tools, refused = asyncio.run(session())
    names = {t.name for t in tools.tools}
    assert "read_files" in names and not names & {"delete_files", "move_files", "write_files", "send_messages"}
    assert asked == [] and victim.exists()
    assert refused.is_error is True and refused.structured_content["error_class"] == "AutonomyReadOnly", refused.structured_content
    assert "runs read-only (autonomy read_only)" in refused.structured_content["error"]["message"]
    [calls] = [events for events in _invocations(env).values() if events[0]["caller"].get("kind") == "mcp"]
    assert [e["type"] for e in calls] == ["InvocationRequested", "InvocationRefused"] and calls[0]["autonomy"] == "read_only"
