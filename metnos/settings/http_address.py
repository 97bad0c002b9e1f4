"""Addresses as settings give them: the daemon's HOST:PORT (--http, ``[daemon] http``) and an LLM server's URL."""

from __future__ import annotations

from urllib.parse import urlsplit

from metnos.settings.errors import HttpAddressError

DEFAULT_HTTP = "127.0.0.1:8737"

__all__ = ["DEFAULT_HTTP", "HttpAddressError", "http_url", "parse_address"]


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not sep or not host or not 0 <= number <= 65535:
        raise HttpAddressError(f"the HTTP address must be HOST:PORT, like 127.0.0.1:8737, not {text!r}")
    return host, number


def http_url(v: str) -> str:
    """An http(s) URL with a host, without its trailing slash; ValueError otherwise (for a pydantic validator)."""
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"must be an http(s) URL like http://127.0.0.1:8080, not {v!r}")
    return v.rstrip("/")
