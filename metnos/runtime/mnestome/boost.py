"""The mnestome's word in the pre-filter (seeds/004 ch. 9: "candidate executors
ordered by the weight of mnests reaching them from the current context").

``context`` is the executors the turn stands on (what the caller decides:
the executors already run, or the pre-filter's matched candidates). A
candidate reached from one of them by a strong mnest (active, weight at
least the bootstrap weight: a seed mnest, or an observed one used twice in
a short while) gains ``POINTS x weight``, where POINTS is one affinity hit
of the pre-filter, so a mnest can reorder close candidates but never buries
a clear word match. Executors reached that way but absent from the pool are
added after it (at most ``MAX_ADDED``), if the catalogue still offers them,
but only through a mnest that use has walked. A seed mnest is a prior that
data *can* pass, read off the contracts; every one weighs the same, so it
cannot tell which of a producer's consumers a request wants, and adding them
would pull unrelated executors into every pool (``filter_lists`` matches
"time", and would bring ``delete_files`` to "what time is it"). It may still
raise a candidate already in the pool. A seed mnest reinforced by a turn has
been walked.

``boost`` computes a record of what it did; ``apply_boost`` rebuilds the
new ranking from the ranking and that record alone, so a replay that reads
the record back gets the same pool without the mnestome.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from domain import mnest_weight as mw
from domain.mnest import ACTIVE

STRONG_WEIGHT = mw.BOOTSTRAP_WEIGHT
SEED = "seed"
POINTS = 2.0
MAX_ADDED = 3


def boost(ranking: Mapping[str, Any], state: Mapping[str, Any], context: Iterable[str], *,
          catalogue: Collection[str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    ctx = sorted(set(context))
    # dst -> (-weight, src, mnest id): the smallest is the strongest, ties by name;
    # ``best`` over every strong mnest, ``walked`` over those use has walked.
    best: dict[str, tuple[float, str, str]] = {}
    walked: dict[str, tuple[float, str, str]] = {}
    wanted = set(ctx)
    for m in state["mnests"].values():
        if m["state"] != ACTIVE or m["weight"] < STRONG_WEIGHT or m["src_executor"] not in wanted:
            continue
        dst = m["dst_executor"]
        if dst in wanted:
            continue
        cand = (-m["weight"], m["src_executor"], m["id"])
        if dst not in best or cand < best[dst]:
            best[dst] = cand
        if (m["origin"] != SEED or m["uses"] > 1) and (dst not in walked or cand < walked[dst]):
            walked[dst] = cand
    in_pool = {c["name"] for c in ranking.get("candidates", [])}
    boosts = []
    for name in sorted(best):
        if name not in in_pool and (catalogue is None or name not in catalogue or name not in walked):
            continue
        neg_weight, src, mid = best[name] if name in in_pool else walked[name]
        weight = -neg_weight
        boosts.append({"name": name, "from": src, "mnest": mid, "weight": round(weight, 6), "added": name not in in_pool})
    added = sorted((b for b in boosts if b["added"]), key=lambda b: (-b["weight"], b["name"]))[MAX_ADDED:]
    dropped = {b["name"] for b in added}
    boosts = [b for b in boosts if b["name"] not in dropped]
    record = {"context": ctx, "strong_weight": STRONG_WEIGHT, "points": POINTS, "boosts": boosts}
    return apply_boost(ranking, record), record


def apply_boost(ranking: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(ranking))
    candidates = out.get("candidates", [])
    by_name = {c["name"]: c for c in candidates}
    points = float(record["points"])
    for b in record["boosts"]:
        gain = round(points * b["weight"], 4)
        if b["added"]:
            candidates.append({
                "name": b["name"], "version": None, "score": gain, "affinity_hits": [], "description_hits": [],
                "via": "mnest", "phrase": None, "mnest_boost": {"from": b["from"], "mnest": b["mnest"], "weight": b["weight"]},
            })
        else:
            c = by_name[b["name"]]
            c["score"] = round(c["score"] + gain, 4)
            c["mnest_boost"] = {"from": b["from"], "mnest": b["mnest"], "weight": b["weight"]}
    candidates.sort(key=lambda c: (-c["score"], c["name"]))
    out["candidates"] = candidates
    out["mnest"] = dict(record)
    return out
