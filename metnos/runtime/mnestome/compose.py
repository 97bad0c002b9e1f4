"""Synt compose-only: close a gap with a chain of executors that already exist
(seeds/002 ch. 11.1.1). No LLM, no budget: a breadth-first search over the
mnestome.

The gap is a wanted executor, e.g. ``extract_pdf_text`` fed from ``read_files``.
A chain closes it when, starting from the executor that fed the call, it
follows active mnests (weight at or above the decay threshold: paths the
user really walks) through executors whose names, taken together, carry
every content word of the wanted name (``extract``, ``pdf``, ``text``).
Names are the only evidence the mnestome holds about what an executor does,
so the match is on them, literally; a miss returns ``None`` and the caller
keeps the plain "nonexistent executor" observation.

Among chains that close the gap the shortest wins, then the heaviest
(product of weights), then the first in name order, so the answer is a
function of the mnestome alone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from domain import mnest_weight as mw
from domain.mnest import ACTIVE
from metnos.runtime.mnestome.turn_facts import step_references
from metnos.runtime.step.text import STOPWORDS, tokens

MAX_DEPTH = 3
MAX_FRONTIER = 5_000


def wanted_words(name: str) -> frozenset[str]:
    return frozenset(t for t in tokens(name) if t not in STOPWORDS)


def _graph(state: Mapping[str, Any], catalogue: Collection[str] | None, min_weight: float) -> dict[str, list[tuple]]:
    """Executor name -> its outgoing edges (dst, dst_version, weight, key, mnest id), by dst name."""
    graph: dict[str, dict[str, tuple]] = {}
    for m in state["mnests"].values():
        if m["state"] != ACTIVE or m["weight"] < min_weight:
            continue
        dst = m["dst_executor"]
        if catalogue is not None and dst not in catalogue:
            continue
        out = graph.setdefault(m["src_executor"], {})
        best = out.get(dst)
        # Versions are collapsed: the chain names executors, the heaviest mnest speaks for the pair.
        if best is None or (m["weight"], m["key"]) > (best[2], best[3]):
            out[dst] = (dst, m["dst_version"], m["weight"], m["key"], m["id"])
    return {src: sorted(edges.values(), key=lambda e: e[0]) for src, edges in graph.items()}


def compose(state: Mapping[str, Any], desired_signature: Mapping[str, Any], *, start: str | None = None,
            catalogue: Collection[str] | None = None, min_weight: float = mw.DECAY_WEIGHT,
            max_depth: int = MAX_DEPTH) -> dict[str, Any] | None:
    """The chain of existing executors that stands in for ``desired_signature['name']``, or None.

    ``start`` is the executor whose output was meant for the wanted one
    (``desired_signature['from']`` if not given); without either, any
    executor whose name shares a wanted word can start the chain.
    """
    desired = str(desired_signature.get("name") or "")
    want = wanted_words(desired)
    if not want:
        return None
    graph = _graph(state, catalogue, min_weight)
    start = start or desired_signature.get("from")
    # With a known start the chain stands after it, so only the chain's names
    # count; without one, the starting executor is part of the chain.
    if start:
        frontier = [((), frozenset(), 1.0, start, start)]
    else:
        frontier = [((), wanted_words(s) & want, 1.0, s, s) for s in sorted(graph) if wanted_words(s) & want]
    for _depth in range(max_depth):
        nxt, done = [], []
        for chain, covered, weight, node, origin in frontier:
            visited = {origin, *(e[0] for e in chain)}
            for edge in graph.get(node, ()):
                dst = edge[0]
                if dst in visited or dst == desired:
                    continue
                got = covered | (wanted_words(dst) & want)
                (done if got == want else nxt).append(((*chain, edge), got, weight * edge[2], dst, origin))
        if done:
            chain, _, weight, _, origin = min(done, key=lambda p: (-p[2], p[4], [e[0] for e in p[0]]))
            return {
                "name": desired,
                "from": origin,
                "chain": ([] if start else [origin]) + [e[0] for e in chain],
                "versions": ([] if start else [None]) + [e[1] for e in chain],
                "mnests": [e[4] for e in chain],  # one fewer than the chain without a start
                "weight": round(weight, 6),
                "covers": sorted(want),
            }
        # Bounded so a dense mnestome still answers in milliseconds; the
        # heaviest partial paths are the ones kept.
        nxt.sort(key=lambda p: (-len(p[1]), -p[2], p[4], [e[0] for e in p[0]]))
        frontier = nxt[:MAX_FRONTIER]
    return None


def suggest(state: Mapping[str, Any], desired: str, args: Mapping[str, Any], invoked: Mapping[int, tuple[str, str]],
            *, current_step: int, catalogue: Collection[str] | None = None) -> dict[str, Any] | None:
    """The ``synt`` field for the observation of a call to a nonexistent executor.

    ``invoked`` maps earlier step numbers to the (executor, version) that
    ran there. Without a reference to an earlier step there is no passing,
    hence no gap to compose around, and the answer is None.
    """
    for step, _field, _arg in step_references(dict(args)):
        if step >= current_step or step not in invoked:
            continue
        start = invoked[step][0]
        found = compose(state, {"name": desired}, start=start, catalogue=catalogue)
        if found is None:
            continue
        chain = " -> ".join(found["chain"])
        return {
            "kind": "compose",
            "instead_of": desired,
            "from_step": step,
            "chain": found["chain"],
            "versions": found["versions"],
            "mnests": found["mnests"],
            "weight": found["weight"],
            "message": f"{desired} does not exist; the output of step {step} ({start}) can go through {chain} instead",
        }
    return None
