"""The daemon's HTTP address, as --http and ``[daemon] http`` give it: HOST:PORT, checked where it is read."""

from __future__ import annotations

from domain.errors import MetnosError

DEFAULT_HTTP = "127.0.0.1:8737"


class HttpAddressError(MetnosError):
    """--http or [daemon] http is not a HOST:PORT this machine can listen on."""


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
