"""The ways in that a service starts, named here by module, never imported by name in code.

The layers let an adapter import the services and never the other way
round, and the adapters import nothing of each other; yet the daemon starts
the channels, serves MCP under its HTTP server, and ``metnos mcp serve``
speaks MCP over stdio. So this registry names those modules as strings and
loads them when the service runs: one place to read which adapter plugs in
where.

* ``HTTP_MODULE`` has ``start_http(host, address) -> server``: the daemon's
  HTTP API and dashboard, up and listening (``.url``, ``.stop()``).
* A *channel* module (Telegram, …) is named in ``CHANNEL_MODULES`` and has
  ``channel(host) -> Channel | None``: None when config.toml does not enable
  it. The daemon starts each channel after the HTTP server is up and stops
  it, in reverse order, before the runtime closes. A channel runs turns
  through ``host.ask(text, approver=..., channel="telegram")`` and answers
  approvals in its own medium.
* A *mount* module (MCP's streamable HTTP, …) is named in ``MOUNT_MODULES``
  and has ``mount(host) -> tuple[str, ASGIApp] | None``: the path prefix and
  the ASGI application served under it, behind the same token gate as the
  rest.
* ``MCP_STDIO_MODULE`` has ``serve_stdio(gate)``, awaited on an event loop.

A channel or mount module not installed is skipped; one that fails to start
stops the daemon with its error (fail closed: a channel the user configured
is never silently absent).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Protocol

HTTP_MODULE = "metnos.adapters.daemon.app"
CHANNEL_MODULES: tuple[str, ...] = ("metnos.adapters.channels.telegram",)
MOUNT_MODULES: tuple[str, ...] = ("metnos.adapters.channels.mcp_http",)
MCP_STDIO_MODULE = "metnos.adapters.channels.mcp_server"


class Channel(Protocol):
    name: str

    def start(self) -> None:
        """Begin serving (e.g. a long-polling thread); return at once."""

    def stop(self) -> None:
        """Stop serving and wait for work in flight to end."""


def _modules(names: tuple[str, ...]) -> Iterator[Any]:
    for name in names:
        try:
            yield importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise


def channels(host: Any, names: tuple[str, ...] | None = None) -> list[Channel]:
    found = (module.channel(host) for module in _modules(CHANNEL_MODULES if names is None else names))
    return [c for c in found if c is not None]


def mounts(host: Any, names: tuple[str, ...] | None = None) -> list[tuple[str, Any]]:
    found = (module.mount(host) for module in _modules(MOUNT_MODULES if names is None else names))
    return [m for m in found if m is not None]


def start_http(host: Any, address: str) -> Any:
    """The daemon's HTTP server for ``host``, listening on ``address``."""
    return importlib.import_module(HTTP_MODULE).start_http(host, address)


def mcp_stdio(gate: Any) -> Any:
    """The coroutine that speaks MCP on standard input and output for ``gate``."""
    return importlib.import_module(MCP_STDIO_MODULE).serve_stdio(gate)
