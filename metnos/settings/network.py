"""``[network]``: the hosts an executor with a network grant may reach (docs/network.md).

Absent, the list is empty: no executor reaches any host until the user says which. The patterns
are the manifests' own (metnos.mechanisms.sandbox.netallow matches them).
"""

from __future__ import annotations

import re
from typing import Any

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
