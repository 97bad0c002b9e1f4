"""While the daemon stops, every request is answered 503 at once, saying why, instead of starting work.

Outermost with the size limit: nothing behind it runs, so a stop is not held
up by a new turn, and a client learns to come back rather than wait.
"""

from __future__ import annotations

from typing import Any

import orjson

from metnos.services.host import STOPPING


class RefuseWhileStopping:
    def __init__(self, app: Any, host: Any) -> None:
        self.app = app
        self.host = host

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not getattr(self.host, "stopping", False):
            await self.app(scope, receive, send)
            return
        body = orjson.dumps({"error": {"kind": "DaemonStopping", "message": STOPPING}})
        await send({"type": "http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"retry-after", b"10"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
