"""Issue 21 "done when": a real `metnos daemon` serves Telegram and MCP.

The daemon (a real process, both layouts) is configured with `[telegram]`
pointing at the fake Bot API on 127.0.0.1: a chat message runs a turn whose
action is approved with the button in the chat, and runs. The MCP app is
mounted at /mcp/ behind the daemon's token: the official SDK's client calls
get_now over HTTP with the token, and without it gets 401 and nothing runs.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from metnos.settings.workspace import Workspace
from tests.support.cli_process import metnos_env, run
from tests.support.daemon_process import start_daemon
from tests.support.fake_telegram import FakeBotAPI
from tests.support.layouts import layout_env
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.support.workspace_template import initialise

pytestmark = pytest.mark.bwrap

TOKEN = "777000:DAEMON-test-token"
CHAT = 5150


def test_the_daemon_serves_a_telegram_chat_and_an_mcp_client(tmp_path: Path, layout: str) -> None:
    script = [call("send_messages", {"messages": [{"to_user": "lucia", "body": "on my way"}]}), text("I told lucia you are on your way.")]
    with FakeBotAPI(TOKEN) as bot, ScriptedLLM(script) as llm:
        env = metnos_env(layout_env(layout, tmp_path, os.environ), METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted",
                         METNOS_TEST_BOT_TOKEN=TOKEN)
        initialise(env)
        workspace = Workspace.from_env(env)
        workspace.config_file.write_text(
            f'[telegram]\ntoken_env = "METNOS_TEST_BOT_TOKEN"\nallowed_chats = [{CHAT}]\nbase_url = "{bot.url}"\npoll_timeout_s = 1\n')
        daemon = start_daemon(env)
        try:
            bot.user_says(CHAT, "tell lucia I am on my way")
            question = bot.wait_for("sendMessage", lambda p: "reply_markup" in p)
            assert "send_messages" in question.params["text"]
            bot.press(question.result, question.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
            bot.wait_for("sendMessage", lambda p: p["text"] == "I told lucia you are on your way.")
            assert len(list(workspace.outbox_dir.glob("*.json"))) == 1

            async def mcp_call(token: str | None) -> float:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                        Client(streamable_http_client(f"{daemon.url}/mcp/", http_client=http)) as client:
                    result = await client.call_tool("get_now", {})
                    assert result.is_error is False, result.structured_content
                    return result.structured_content["metadata"]["epoch"]

            assert asyncio.run(mcp_call(daemon.token)) > 0
            before = daemon.last_event_id()
            refused = httpx.post(f"{daemon.url}/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                            "params": {"name": "get_now", "arguments": {}}}, timeout=30)
            assert refused.status_code == 401
            assert daemon.last_event_id() == before
        finally:
            out, err = daemon.stop()
    assert TOKEN not in out + err
    assert "telegram: polling as @metnos_test_bot" in err
    events = run(["events", "--json", "--topic", "Invocation"], env).stdout
    assert '"channel":"telegram"' in events and '"kind":"mcp","transport":"http"' in events
