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

from collections.abc import Sequence

# The instance's list is a setting ([network] allow, metnos.settings.network), and so is matching a host to it:
# the settings check [web] search_url against it too.
from metnos.settings.errors import NetworkConfigError
from metnos.settings.network import HOST_PATTERN, NETWORK_ALLOW, matches

__all__ = ["HOST_PATTERN", "NETWORK_ALLOW", "NetworkConfigError", "admits", "allowed", "declared", "matches", "valid_pattern"]


def valid_pattern(text: str) -> bool:
    return text == NETWORK_ALLOW or bool(HOST_PATTERN.match(text))


def declared(host: str, port: int | None, manifest: Sequence[str]) -> bool:
    """On the manifest's list (``$NETWORK_ALLOW`` leaves the choice to the instance)."""
    return any(d == NETWORK_ALLOW or matches(host, port, d) for d in manifest)


def allowed(host: str, port: int | None, allow: Sequence[str]) -> bool:
    return any(matches(host, port, a) for a in allow)


def admits(host: str, port: int | None, manifest: Sequence[str], allow: Sequence[str]) -> bool:
    return declared(host, port, manifest) and allowed(host, port, allow)
