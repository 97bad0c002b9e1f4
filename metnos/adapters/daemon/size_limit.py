"""The most a request's body may hold, for every path of the daemon (the API, the dashboard, MCP at /mcp).

A body past the limit is refused with 413 before it is taken whole: at once when its
Content-Length says so, else as soon as the bytes read pass the limit (a chunked body).
Without it a 60 MB ``POST /api/ask`` went whole into the log, and every later turn folded it.
The limit is ``[daemon] max_request_bytes`` in config.toml (docs/config.md).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

#: How long and how much of a refused body is read and thrown away before the 413 is sent. A server
#: that answers and closes with the client's bytes still unread makes the kernel reset the connection,
#: and the reset can reach the client before the 413 does: it then sees "peer closed connection"
#: instead of the reason. Past these bounds (a client that never stops sending) the answer goes anyway.
DRAIN_SECONDS = 10.0
DRAIN_BYTES = 512 * 1024 * 1024


class BodyTooLarge(BaseException):
    """Raised from ``receive`` when the bytes read pass the limit. A BaseException, so that no route's
    ``except Exception`` turns it into an error of its own: it reaches :class:`SizeLimit`, which answers 413."""


class SizeLimit:
    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await self._refuse(send, 400, "bad_request", f"Content-Length {declared.decode('latin-1')!r} is not a number")
                return
            if size > self.max_bytes:
                await self._drain(receive)
                await self._too_large(send)
                return
        read = 0
        started = False

        async def counted() -> Any:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def watched(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if not started:
                await self._drain(receive)
                await self._too_large(send)

    @staticmethod
    async def _drain(receive: Any) -> None:
        deadline, thrown = time.monotonic() + DRAIN_SECONDS, 0
        while (left := deadline - time.monotonic()) > 0 and thrown < DRAIN_BYTES:
            try:
                message = await asyncio.wait_for(receive(), left)
            except asyncio.TimeoutError:
                return
            if message["type"] != "http.request":
                return
            thrown += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _too_large(self, send: Any) -> None:
        await self._refuse(send, 413, "too_large", f"the request's body is over {self.max_bytes} bytes, the most this daemon "
                           "takes; send less, or raise [daemon] max_request_bytes in config.toml")

    @staticmethod
    async def _refuse(send: Any, status: int, kind: str, message: str) -> None:
        body = orjson.dumps({"error": {"kind": kind, "message": message}})
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
