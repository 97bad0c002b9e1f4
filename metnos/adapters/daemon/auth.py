"""The daemon's one gate: every request carries the token, or it is answered 401 and touches nothing.

The token comes as ``Authorization: Bearer <token>`` (the API, scripts, MCP
clients) or as the dashboard's HttpOnly, SameSite=Strict cookie, which the
login form sets. This is ASGI middleware around the whole application, so a
sub-application mounted later (MCP's streamable HTTP) is behind it too. A
state-changing request that comes from another origin (a page elsewhere
posting with the user's cookie) is refused as well.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson

from metnos.services.token import same_token

COOKIE = "metnos_token"
# Paths that must answer without a token: the login form and its post.
OPEN_PATHS = frozenset({"/login"})
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def cookie_token(cookie_header: str) -> str | None:
    for part in cookie_header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def presented_token(headers: dict[str, str]) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return cookie_token(headers.get("cookie", ""))


def cross_origin(headers: dict[str, str]) -> bool:
    """A browser's request whose page is on another origin than this daemon."""
    origin = headers.get("origin")
    if not origin or origin == "null":
        return origin == "null"
    return urlsplit(origin).netloc != headers.get("host", "")


class TokenGate:
    def __init__(self, app: Any, token: str, login_page: Any) -> None:
        self.app = app
        self.token = token
        self.login_page = login_page

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        method = scope.get("method", "GET")
        if method not in _SAFE_METHODS and cross_origin(headers):
            await _refuse(send, 403, "cross_origin", "a request from another origin may not change anything here")
            return
        if scope["path"] in OPEN_PATHS or same_token(presented_token(headers), self.token):
            await self.app(scope, receive, send)
            return
        if "text/html" in headers.get("accept", "") and method in _SAFE_METHODS:
            await _send(send, 401, self.login_page(scope["path"]), "text/html; charset=utf-8")
            return
        await _refuse(send, 401, "unauthorized", "this daemon needs its token: `Authorization: Bearer <token>`; `metnos daemon token` prints it")


async def _refuse(send: Any, status: int, kind: str, message: str) -> None:
    await _send(send, status, orjson.dumps({"error": {"kind": kind, "message": message}}), "application/json",
                extra=[(b"www-authenticate", b'Bearer realm="metnos"')] if status == 401 else [])


async def _send(send: Any, status: int, body: bytes, content_type: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})
