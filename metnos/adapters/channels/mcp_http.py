"""MCP over streamable HTTP: an ASGI application to mount (the daemon serves it at ``/mcp``).

The same server as ``metnos mcp serve`` (metnos/adapters/channels/mcp_server.py),
with the caller ``{"kind": "mcp", "transport": "http", ...}``. It answers at
whatever path it is mounted under.

The SDK's session manager needs a task group that lives as long as the
application. A sub-application mounted in Starlette never sees the parent's
lifespan, so this one starts its manager itself, in a task of its own on the
server's event loop, at the first request (or at a ``lifespan`` startup, when
it is the top application), and ends it at :meth:`aclose` or at the loop's
end. Authentication is the host's: the daemon puts its token gate in front.
Behind it, the SDK's DNS-rebinding protection admits only loopback ``Host``
and ``Origin`` headers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from metnos.adapters.channels.mcp_server import build_server
from metnos.services.gated_call import GatedCaller

LOOPBACK = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)


class MCPHttpApp:
    def __init__(self, gate: GatedCaller, *, security: TransportSecuritySettings | None = LOOPBACK) -> None:
        self._manager = StreamableHTTPSessionManager(app=build_server(gate, transport="http"), security_settings=security)
        self._started: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._failure: BaseException | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        await self._ensure_started()
        await self._manager.asgi_app(scope, receive, send)

    async def _ensure_started(self) -> None:
        if self._started is None:
            self._started, self._stop = asyncio.Event(), asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="metnos-mcp-sessions")
        await self._started.wait()
        if self._failure is not None:
            msg = f"the MCP session manager could not start: {self._failure}"
            raise RuntimeError(msg)

    async def _run(self) -> None:
        assert self._started is not None and self._stop is not None
        try:
            # Entered and left in this one task, as anyio's task groups require.
            async with self._manager.run():
                self._started.set()
                await self._stop.wait()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting request, then the task ends
            self._failure = e
            self._started.set()

    async def aclose(self) -> None:
        if self._stop is not None and self._task is not None:
            self._stop.set()
            await self._task

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self._ensure_started()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def mcp_http_app(host: Any) -> MCPHttpApp:
    """The app for a host (the daemon's), with the executors' calls recorded as the mcp caller."""
    return MCPHttpApp(GatedCaller(host, caller={"kind": "mcp"}, env=getattr(host, "env", None)))


def mount(host: Any) -> tuple[str, MCPHttpApp]:
    """The daemon's hook (metnos/services/extensions.py): MCP at ``/mcp/``, behind the daemon's token."""
    return "/mcp", mcp_http_app(host)
