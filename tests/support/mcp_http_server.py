"""An MCP server over streamable HTTP on 127.0.0.1 for a test: the MCP SDK's MCPServer on a real uvicorn."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def tides_server() -> MCPServer:
    server = MCPServer("tides", version="1.0.0")

    @server.tool(name="get_tide", description="The next high tide at a harbour.",
                 annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
    def get_tide(harbour: str) -> str:
        return f"High tide at {harbour}: 16:10"

    return server


@contextmanager
def mcp_http_server() -> Iterator[str]:
    """The tides server at ``/mcp`` on a free port; yields its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(tides_server().streamable_http_app(), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        thread.join(30)
