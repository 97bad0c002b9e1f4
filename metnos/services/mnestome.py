"""The mnestome: what fed what, list, show with history, graph, age (seeds/002 ch. 11)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from domain.errors import MetnosError
from metnos.runtime.booted import Runtime
from metnos.runtime.mnestome.ager import age as age_mnests, plan as ager_plan
from metnos.runtime.mnestome.snapshot import write_snapshot
from metnos.services import wiring
from metnos.services.queries import mnestome_graph
from projections.mnestome import MnestomeFold, all_states, select, top

__all__ = ["Aged", "age", "all_states", "check_states", "graph_rows", "heaviest", "mnestome_graph", "mnests_between", "served"]


def check_states(given: list[str] | None) -> list[str] | None:
    """The states asked for, each a known one; None: the default states."""
    if not given:
        return None
    bad = [s for s in given if s not in all_states()]
    if bad:
        raise MetnosError(f"unknown mnest state {', '.join(bad)}; states: {', '.join(all_states())}")
    return given


def _state() -> dict[str, Any]:
    with wiring.boot(birth=False) as rt:
        return rt.mnestome.catch_up(rt.log)


def heaviest(limit: int, *, tag: str | None = None, states: list[str] | None = None) -> list[dict[str, Any]]:
    """The ``limit`` heaviest mnests."""
    return top(_state(), limit, tag=tag, states=states)


def served(runtime: Runtime, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` heaviest mnests of every state, on a held runtime (the daemon's)."""
    return top(runtime.mnestome.state(), limit, states=all_states())


def mnests_between(src: str, sv: str | None, dst: str, dv: str | None, shown: str) -> list[dict[str, Any]]:
    """The mnests from ``src`` (at version ``sv``, any when None) to ``dst``, each with its ``history``: its
    weight, uses and state after each of its events."""
    with wiring.boot(birth=False) as rt:
        state = rt.mnestome.catch_up(rt.log)
        found = [m for m in select(state, states=all_states(), src=src, dst=dst)
                 if (sv is None or m["src_version"] == sv) and (dv is None or m["dst_version"] == dv)]
        if not found:
            raise MetnosError(f"no mnest from {shown}; see `metnos mnestome list`")
        found.sort(key=lambda m: m["key"])
        fold = MnestomeFold()
        for m in found:
            history, scratch = [], fold.initial()
            for e in rt.log.events.get(UUID(m["id"])):
                fold.apply(scratch, e, 0)
                now = scratch["mnests"][m["id"]]
                history.append({"event": type(e).__name__, "at": e.timestamp.isoformat(), "weight": now["weight"],
                                "uses": now["uses"], "state": now["state"], "turn_id": getattr(e, "turn_id", None)})
            m["history"] = history
    return found


def mark_private(src: str, dst: str, *, private: bool = True) -> list[dict[str, Any]]:
    """Mark the mnests from ``src`` to ``dst`` (executor names) private, or not: a private mnest is the
    host's, left out of a guest's turn. The mnests marked."""
    with wiring.boot(birth=False) as rt:
        state = rt.mnestome.catch_up(rt.log)
        found = list(select(state, states=all_states(), src=src, dst=dst))
        if not found:
            raise MetnosError(f"no mnest from {src} to {dst}; see `metnos mnestome list`")
        now = rt.clock()
        for m in found:
            mnest = rt.log.repository.get(UUID(m["id"]))
            mnest.mark_private(private=private, by="user:cli", at=now)
            rt.log.save(mnest)
        state = rt.mnestome.catch_up(rt.log)
        return [state["mnests"][m["id"]] for m in found]


def graph_rows(states: list[str] | None, min_weight: float) -> tuple[list[dict[str, Any]], Path]:
    """The mnests to draw, and the data folder the drawing goes to by default."""
    with wiring.boot(birth=False) as rt:
        state = rt.mnestome.catch_up(rt.log)
        data_dir = rt.workspace.data_dir
    return [m for m in select(state, states=states) if m["weight"] >= min_weight], data_dir


@dataclass
class Aged:
    """What the ager did (or would do, ``due``, on a dry run) at ``at``."""

    at: datetime
    state: dict[str, Any]
    due: list[Any] | None = None
    changed: int = 0
    events: dict[str, int] = field(default_factory=dict)
    snapshot: Path | None = None


def age(at_text: str | None, *, dry_run: bool, parse_at: Any) -> Aged:
    """Run the ager at a date (``parse_at(text, now)``; now by default): decay, demotions, archive proposals,
    purges, then a snapshot. ``dry_run`` only says which mnests would change."""
    with wiring.boot(birth=False) as rt:
        at = parse_at(at_text, rt.clock())
        state = rt.mnestome.catch_up(rt.log)
        if dry_run:
            return Aged(at, state, due=ager_plan(state, at))
        changed = age_mnests(rt, at, state=state)
        counts: dict[str, int] = {}
        for m in changed:
            for e in m.pending_events:
                counts[type(e).__name__] = counts.get(type(e).__name__, 0) + 1
        if changed:
            rt.log.save(*changed)
        rt.mnestome.catch_up(rt.log)
        snap = write_snapshot(rt.mnestome.state_bytes(), rt.workspace.data_dir, at, position=rt.mnestome.position)
    return Aged(at, state, changed=len(changed), events=counts, snapshot=snap)
