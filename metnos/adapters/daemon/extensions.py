"""Where other ways in join the daemon: channels that start and stop with it, and mounted sub-apps.

A *channel* module (Telegram, …) is named in ``CHANNEL_MODULES`` and has
``channel(host) -> Channel | None``: None when config.toml does not enable
it. The daemon starts each channel after the HTTP server is up and stops it,
in reverse order, before the runtime closes. A channel runs turns through
``host.ask(text, approver=..., channel="telegram")`` and answers approvals in
its own medium.

A *mount* module (MCP's streamable HTTP, …) is named in ``MOUNT_MODULES`` and
has ``mount(host) -> tuple[str, ASGIApp] | None``: the path prefix and the
ASGI application served under it, behind the same token gate as the rest.

A module not installed is skipped; one that fails to start stops the daemon
with its error (fail closed: a channel the user configured is never
silently absent).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Protocol

CHANNEL_MODULES: tuple[str, ...] = ("metnos.adapters.channels.telegram",)
MOUNT_MODULES: tuple[str, ...] = ("metnos.adapters.channels.mcp_http",)


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
