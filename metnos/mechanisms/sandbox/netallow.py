"""Which hosts an executor may reach: its manifest's list met by the instance's.

Two lists decide, and a host must be on both:

* the manifest's ``[capabilities] network`` (signed with the executor): host
  patterns (``example.org``, ``*.example.org``, ``host:8080``, ``host:*``,
  ``*``), or ``$NETWORK_ALLOW``, which stands for "whatever this instance
  allows" (get_urls declares that, not ``*``);
* the instance's ``[network] allow`` in ``config.toml``, the same patterns.
  Absent, it is empty: no executor reaches any host until the user says which.

A pattern without a port admits the web ports (80, 443) only. The host is
compared as the executor names it (lower-cased, no trailing dot); the proxy
that enforces this resolves it on the host side, never inside the sandbox.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from domain.errors import MetnosError

NETWORK_ALLOW = "$NETWORK_ALLOW"
# A host, optionally with a port; "host:*" is any port of that host.
HOST_PATTERN = re.compile(r"^(\*|[A-Za-z0-9.*-]+|\[[0-9a-fA-F:]+\])(:(\d{1,5}|\*))?$")


class NetworkConfigError(MetnosError):
    """``[network]`` in config.toml is not what it must be."""


def valid_pattern(text: str) -> bool:
    return text == NETWORK_ALLOW or bool(HOST_PATTERN.match(text))


def load_allow(config_file: Path | None) -> tuple[str, ...]:
    """``[network] allow`` of ``config_file``; a missing file or section is empty."""
    if config_file is None or not config_file.exists():
        return ()
    try:
        data = tomllib.loads(config_file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise NetworkConfigError(f"{config_file}: not valid TOML: {e}") from None
    section = data.get("network", {})
    if not isinstance(section, dict):
        raise NetworkConfigError(f"{config_file}: [network] must be a table")
    allow = section.get("allow", [])
    if not isinstance(allow, list) or not all(isinstance(h, str) for h in allow):
        raise NetworkConfigError(f"{config_file}: [network] allow must be a list of host patterns")
    bad = [h for h in allow if h == NETWORK_ALLOW or not HOST_PATTERN.match(h)]
    if bad:
        raise NetworkConfigError(f"{config_file}: [network] allow: {bad} are not host patterns "
                                 "(host, *.domain, host:port, host:*, or *)")
    return tuple(h.strip().lower() for h in allow)


def matches(host: str, port: int | None, pattern: str) -> bool:
    """Whether ``host`` (on ``port``; None: not said) fits one pattern."""
    if "://" in pattern:
        pattern = urlsplit(pattern).netloc
    if pattern.startswith("["):  # an IPv6 literal, "[::1]" or "[::1]:8080"
        p_host, _, rest = pattern[1:].partition("]")
        p_port = rest[1:] if rest.startswith(":") else ""
    else:
        p_host, _, p_port = pattern.rpartition(":") if pattern.count(":") == 1 else (pattern, "", "")
    p_host = p_host.rstrip(".")
    # "host:*" is any port of host; a bare "*" is any host on the web ports.
    if p_port and p_port != "*" and (port is None or str(port) != p_port):
        return False
    if not p_port and port is not None and port not in (80, 443):
        return False
    if p_host == "*":
        return True
    if p_host.startswith("*."):
        return host.endswith(p_host[1:]) and host != p_host[2:]
    return host == p_host


def declared(host: str, port: int | None, manifest: Sequence[str]) -> bool:
    """On the manifest's list (``$NETWORK_ALLOW`` leaves the choice to the instance)."""
    return any(d == NETWORK_ALLOW or matches(host, port, d) for d in manifest)


def allowed(host: str, port: int | None, allow: Sequence[str]) -> bool:
    return any(matches(host, port, a) for a in allow)


def admits(host: str, port: int | None, manifest: Sequence[str], allow: Sequence[str]) -> bool:
    return declared(host, port, manifest) and allowed(host, port, allow)
