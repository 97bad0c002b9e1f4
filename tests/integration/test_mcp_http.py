"""MCP over streamable HTTP, mounted the way the daemon mounts a sub-application (issue 21 item 4).

A real uvicorn on 127.0.0.1 serves a Starlette app with the MCP app under
``/mcp``; the official SDK's client talks to it over HTTP. The mounted app
starts its own session manager (a mount never sees the parent's lifespan).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from metnos.runtime.booted import Runtime
from tests.support.mcp_served import mcp_over_http

pytestmark = pytest.mark.bwrap


@pytest.fixture
def served(home: Path) -> Iterator[tuple[str, Runtime]]:
    with mcp_over_http() as served:
        yield served


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
