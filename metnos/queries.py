"""Read-side questions every way in asks (the CLI, the daemon's HTTP API, the dashboard).

Each takes a booted runtime (or its log) and answers with plain data; the
surfaces only format it.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from metnos.errors import MetnosError

_ENVELOPE = ("originator_id", "originator_version", "timestamp", "originator_topic")


class TurnNotFound(MetnosError):
    """No turn, or more than one, matches the id given."""


def event_state(event: Any) -> dict[str, Any]:
    """An event's own fields, without the envelope every event carries."""
    return {k: v for k, v in vars(event).items() if k not in _ENVELOPE}


def find_turn(turns_state: dict[str, Any], prefix: str) -> str:
    """The one turn whose id starts with ``prefix``."""
    matches = [t for t in turns_state["turns"] if t.startswith(prefix)]
    if not matches:
        raise TurnNotFound(f"no turn starts with {prefix!r}; see `metnos turns list`")
    if len(matches) > 1:
        raise TurnNotFound(f"{prefix!r} matches {len(matches)} turns; give more of the id")
    return matches[0]


def turn_rows(turns_state: dict[str, Any], limit: int = 0) -> list[dict[str, Any]]:
    """The turns, oldest first; the last ``limit`` of them when limit is positive."""
    order = turns_state["order"][-limit:] if limit > 0 else turns_state["order"]
    return [turns_state["turns"][t] for t in order]


def turn_events(runtime: Any, turn_id: str) -> list[dict[str, Any]]:
    """One turn's events, in order, as position, type, timestamp and fields."""
    return [{"position": e.originator_version, "type": type(e).__name__, "timestamp": e.timestamp.isoformat(), "state": event_state(e)}
            for e in runtime.log.events.get(UUID(turn_id))]


def logged_event(notification: Any, event: Any) -> dict[str, Any]:
    """One stored event as ``metnos events --json`` and the daemon's event stream show it."""
    ts = getattr(event, "timestamp", None)
    return {"id": notification.id, "aggregate_id": str(notification.originator_id), "aggregate_version": notification.originator_version,
            "topic": notification.topic, "timestamp": ts.isoformat() if ts else None, "state": event_state(event)}


def catalogue_rows(catalogue_state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every version of every executor: its state in the lifecycle, and whether it is the current one."""
    rows = []
    for entry in sorted(catalogue_state["executors"].values(), key=lambda e: (e["name"], e["origin"])):
        for version, v in sorted(entry["versions"].items()):
            rows.append({
                "name": entry["name"], "origin": entry["origin"], "version": version,
                "current": entry["current"] == version, "state": v["state"], "digest": v["digest"],
                "summary": v["summary"], "reason": v.get("reason"), "since": v.get("since"),
            })
    return rows


def mnestome_graph(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Executors as nodes, mnests as edges weighted by their weight."""
    nodes = sorted({m["src_executor"] for m in rows} | {m["dst_executor"] for m in rows})
    edges = [{"src": m["src_executor"], "dst": m["dst_executor"], "weight": m["weight"], "uses": m["uses"], "state": m["state"]} for m in rows]
    return {"nodes": nodes, "edges": edges}
