"""One JSON POST to an LLM server, with every transport failure mapped to an LLMError.

Both providers go through ``post_json``; it is the one place that sees the
request headers, and it never puts them (or the URL's userinfo or query) in an
error or a log line.
"""

from __future__ import annotations

import errno
import json
import logging
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from metnos.mechanisms.llm.errors import MalformedReply, ProviderHTTPError, ProviderTimeout, ProviderUnreachable

log = logging.getLogger("metnos.mechanisms.llm")


def public_url(url: str) -> str:
    """The URL as it may be shown: no user:password@, no query, no fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# A refused or unroutable connection fails in seconds even when the tier
# allows minutes for a slow CPU model to answer.
CONNECT_TIMEOUT_S = 5.0


def make_client(timeout_s: float, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    timeout = httpx.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s))
    return httpx.Client(timeout=timeout, transport=transport, follow_redirects=False, trust_env=False)


def post_json(client: httpx.Client, url: str, body: dict[str, Any], *, headers: dict[str, str], timeout_s: float) -> dict[str, Any]:
    shown = public_url(url)
    log.debug("POST %s (%d bytes)", shown, len(json.dumps(body)))
    try:
        response = _post_within(client, url, body, headers, timeout_s)
    except _TooSlow:
        raise ProviderTimeout(shown, timeout_s) from None
    except httpx.ConnectTimeout:
        raise ProviderUnreachable(shown, "the connection timed out") from None
    except httpx.TimeoutException:
        raise ProviderTimeout(shown, timeout_s) from None
    except httpx.ConnectError as e:
        raise ProviderUnreachable(shown, _connect_reason(e)) from None
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
        raise ProviderUnreachable(shown, "the connection closed before a complete reply") from None
    except httpx.HTTPError as e:
        raise ProviderUnreachable(shown, type(e).__name__) from None
    if response.status_code >= 400:
        raise ProviderHTTPError(shown, response.status_code, _error_text(response))
    try:
        data = response.json()
    except (ValueError, UnicodeDecodeError):
        start = response.text[:80] if response.content else "(empty body)"
        raise MalformedReply(shown, f"the body is not JSON: {start!r}") from None
    if not isinstance(data, dict):
        raise MalformedReply(shown, f"the body is JSON {type(data).__name__}, not an object")
    return data


class _TooSlow(Exception):
    pass


# How the bytes travelled, no longer true of the decoded body.
_FRAMING = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def _post_within(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float) -> httpx.Response:
    """The whole reply within ``timeout_s``: httpx bounds each read, this bounds their sum,
    so a server that sends a byte now and then cannot stretch the wait."""
    deadline = time.monotonic() + timeout_s
    with client.stream("POST", url, json=body, headers=headers) as response:
        chunks = []
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise _TooSlow
        # What was read (decoded already), handed back as a whole response.
        kept = {k: v for k, v in response.headers.items() if k.lower() not in _FRAMING}
        return httpx.Response(response.status_code, headers=kept, content=b"".join(chunks), request=response.request)


def _connect_reason(e: httpx.ConnectError) -> str:
    cause: BaseException | None = e
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or getattr(cause, "errno", None) == errno.ECONNREFUSED:
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    text = str(e) or "cannot connect"
    return "connection refused" if "refused" in text.lower() else text


def _error_text(response: httpx.Response) -> str:
    """The server's own error message when it gives one (OpenAI and Anthropic nest it under 'error')."""
    try:
        data = response.json()
    except (ValueError, UnicodeDecodeError):
        return response.text
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
    return response.text
