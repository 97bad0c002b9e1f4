"""The most a request's body may hold, for every path of the daemon (the API, the dashboard, MCP at /mcp).

A body past the limit is refused with 413 before it is taken whole: at once when its
Content-Length says so, else as soon as the bytes read pass the limit (a chunked body).
Without it a 60 MB ``POST /api/ask`` went whole into the log, and every later turn folded it.
The limit is ``[daemon] max_request_bytes`` in config.toml (docs/config.md).
"""

from __future__ import annotations

from typing import Any

import orjson


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
                await self._too_large(send)

    async def _too_large(self, send: Any) -> None:
        await self._refuse(send, 413, "too_large", f"the request's body is over {self.max_bytes} bytes, the most this daemon "
                           "takes; send less, or raise [daemon] max_request_bytes in config.toml")

    @staticmethod
    async def _refuse(send: Any, status: int, kind: str, message: str) -> None:
        body = orjson.dumps({"error": {"kind": kind, "message": message}})
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
