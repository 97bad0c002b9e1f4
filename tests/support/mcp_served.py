"""The MCP server over streamable HTTP, served for real on 127.0.0.1 for a test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from metnos.services.host import RuntimeHost
from metnos.adapters.channels.mcp_http import mcp_http_app
from metnos.runtime.booted import Runtime
from metnos.settings.workspace import Workspace


@contextmanager
def mcp_over_http() -> Iterator[tuple[str, Runtime]]:
    """The workspace's runtime behind ``/mcp/`` on a free port: its URL and the runtime."""
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
