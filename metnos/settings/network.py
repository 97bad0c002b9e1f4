"""``[network]``: the hosts an executor with a network grant may reach (docs/network.md).

Absent, the list is empty: no executor reaches any host until the user says which. The patterns
are the manifests' own (metnos.mechanisms.sandbox.netallow matches them).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator

from metnos.settings.declare import setting

NETWORK_ALLOW = "$NETWORK_ALLOW"
# A host, optionally with a port; "host:*" is any port of that host.
HOST_PATTERN = re.compile(r"^(\*|[A-Za-z0-9.*-]+|\[[0-9a-fA-F:]+\])(:(\d{1,5}|\*))?$")


class NetworkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    allow: tuple[str, ...] = setting((), "Host patterns (`host`, `*.domain`, `host:port`, `host:*`, `*`); a pattern "
                                         "without a port admits the web ports (80, 443) only.")

    @field_validator("allow", mode="before")
    @classmethod
    def _patterns(cls, allow: Any) -> Any:
        if not isinstance(allow, (list, tuple)) or not all(isinstance(h, str) for h in allow):
            raise ValueError("must be a list of host patterns")
        bad = [h for h in allow if h == NETWORK_ALLOW or not HOST_PATTERN.match(h)]
        if bad:
            raise ValueError(f"{bad} are not host patterns (host, *.domain, host:port, host:*, or *)")
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
