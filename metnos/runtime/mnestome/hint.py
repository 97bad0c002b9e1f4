"""The mnestome's word to the vaglio (seeds/004 ch. 9: "a strong mnest toward an
action already taken in the past is a hint of telos alignment").

Where the turn stands is the executors it has already run. A call to
``name`` is hinted when a strong mnest (active, at least the bootstrap
weight, as in the pre-filter's boost) leads to ``name`` from one of them,
and use has walked it (an observed mnest, or a seed mnest reinforced by a
turn): a seed mnest alone says only that data can pass, not that the user
ever went that way. The strongest such mnest is the hint, ties by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from domain.mnest import ACTIVE
from metnos.runtime.mnestome.boost import SEED, STRONG_WEIGHT


def telos_hint(state: Mapping[str, Any], name: str, context: Iterable[str]) -> dict[str, Any] | None:
    """{"mnest", "from", "weight", "uses"} of the strongest walked mnest from ``context`` to ``name``, or None."""
    wanted = set(context) - {name}
    best: tuple[float, str, str] | None = None
    found: dict[str, Any] | None = None
    for m in state["mnests"].values():
        if (m["dst_executor"] != name or m["src_executor"] not in wanted or m["state"] != ACTIVE
                or m["weight"] < STRONG_WEIGHT or (m["origin"] == SEED and m["uses"] <= 1)):
            continue
        key = (-m["weight"], m["src_executor"], m["id"])
        if best is None or key < best:
            best = key
            found = {"mnest": m["id"], "from": m["src_executor"], "weight": round(m["weight"], 6), "uses": m["uses"]}
    return found
