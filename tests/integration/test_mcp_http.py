"""MCP over streamable HTTP, mounted the way the daemon mounts a sub-application (issue 21 item 4).

A real uvicorn on 127.0.0.1 serves a Starlette app with the MCP app under
``/mcp``; the official SDK's client talks to it over HTTP. The mounted app
starts its own session manager (a mount never sees the parent's lifespan).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import uvicorn
from mcp import Client
from starlette.applications import Starlette
from starlette.routing import Mount

from metnos.channels.host import RuntimeHost
from metnos.channels.mcp_http import mcp_http_app
from metnos.runtime import Runtime
from metnos.workspace import Workspace

pytestmark = pytest.mark.bwrap


@pytest.fixture
def served(home: Path) -> Iterator[tuple[str, Runtime]]:
    runtime = Runtime.boot(Workspace.from_env())
    app = Starlette(routes=[Mount("/mcp", app=mcp_http_app(RuntimeHost(runtime)))])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp/", runtime
    finally:
        server.should_exit = True
        thread.join(30)
        runtime.close()


def test_an_mcp_client_over_http_lists_calls_approves_and_is_refused(served: tuple[str, Runtime]) -> None:
    url, runtime = served

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async def session() -> tuple[Any, ...]:
        async with Client(url, elicitation_callback=elicit) as client:
            tools = await client.list_tools()
            now = await client.call_tool("get_now", {})
            outside = await client.call_tool("read_files", {"paths": ["/opt/not-granted/x"]})
            sent = await client.call_tool("send_messages", {"messages": [{"to_user": "me", "body": "hi"}]})
            return tools, now, outside, sent

    tools, now, outside, sent = asyncio.run(session())
    assert "get_now" in {t.name for t in tools.tools}
    assert now.is_error is False and now.structured_content["ok"] is True
    assert outside.is_error is True and outside.structured_content["error_class"] == "PolicyViolation"
    assert sent.is_error is False and sent.structured_content["entries"][0]["channel"] == "outbox"

    runtime.refresh()
    requested = [e for _, e in runtime.log.domain_events() if type(e).__name__ == "InvocationRequested"]
    callers = {e.executor: e.caller for e in requested}
    assert callers["get_now"]["kind"] == "mcp" and callers["get_now"]["transport"] == "http"
    assert callers["send_messages"]["approved_by"] == "mcp:elicitation"
    assert callers["read_files"]["transport"] == "http"
