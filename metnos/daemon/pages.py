"""What each dashboard page shows: a function of the request to the template's context."""

from __future__ import annotations

from typing import Any

from metnos import queries
from metnos.daemon.host import DaemonHost


def timeline(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        with host.reading() as rt:
            rows = queries.turn_rows(rt.turns.state(), 100)
        return {"turns": list(reversed(rows))}

    return gather


PAGES = [
    ("/", "timeline.html.jinja", timeline),
]
