"""Read-side questions every way in asks (the CLI, the daemon's HTTP API, the dashboard).

Each takes a booted runtime (or its log) and answers with plain data; the
surfaces only format it.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from domain.base import event_state
from domain.errors import MetnosError
from domain.provenance import described
from metnos.runtime.turn.quarantined import told
from metnos.runtime.turn.shortlist import read_as_no_change
from metnos.settings import i18n
from projections import deliveries

class TurnNotFound(MetnosError):
    """No turn, or more than one, matches the id given."""


class ExecutorNotFound(MetnosError):
    """No executor of that name in the catalogue."""


def find_turn(turns_state: dict[str, Any], prefix: str) -> str:
    """The one turn whose id starts with ``prefix``."""
    matches = [t for t in turns_state["turns"] if t.startswith(prefix)]
    if not matches:
        raise TurnNotFound(f"no turn starts with {prefix!r}; see `metnos turns list`")
    if len(matches) > 1:
        raise TurnNotFound(f"{prefix!r} matches {len(matches)} turns; give more of the id")
    return matches[0]


def turns_now(runtime: Any) -> dict[str, Any]:
    """The turns' read model as last folded (a host's reading has brought it up to date when it could)."""
    return runtime.turns.state()


def catalogue_now(runtime: Any) -> dict[str, Any]:
    """The catalogue's read model as last folded."""
    return runtime.catalogue.state()


def log_head(runtime: Any) -> int:
    """The position of the last event in the log (0 when empty)."""
    return runtime.log.recorder.max_notification_id() or 0


def turns_state(runtime: Any) -> dict[str, Any]:
    """The turns' read model, up to date with the log."""
    return runtime.turns.catch_up(runtime.log)


def turn_log(runtime: Any, turn_id: str) -> list[Any]:
    """One turn's events as recorded, in order."""
    return list(runtime.log.events.get(UUID(turn_id)))


def turn_rows(turns_state: dict[str, Any], limit: int = 0) -> list[dict[str, Any]]:
    """The turns, oldest first; the last ``limit`` of them when limit is positive."""
    order = turns_state["order"][-limit:] if limit > 0 else turns_state["order"]
    return [turns_state["turns"][t] for t in order]


def conversation_turns(turns_state: dict[str, Any], conversation_id: str) -> list[dict[str, Any]]:
    """The turns of one conversation, oldest first: the turn that started it (its id is the conversation's) and those that followed."""
    rows = [t for t in turn_rows(turns_state) if t["id"] == conversation_id or t.get("conversation") == conversation_id]
    if not rows:
        raise TurnNotFound(f"no conversation {conversation_id!r}; the timeline names each turn's")
    return rows


def undelivered(runtime: Any, turn_id: str | None = None) -> list[dict[str, Any]]:
    """The messages the delivery outbox gave up on (a turn's, if given), folded from the log: what never reached its channel."""
    return deliveries.undelivered(deliveries.folded(runtime.log), turn_id)


def turn_events(runtime: Any, turn_id: str) -> list[dict[str, Any]]:
    """One turn's events, in order, as position, type, timestamp and fields."""
    return [{"position": e.originator_version, "type": type(e).__name__, "timestamp": e.timestamp.isoformat(), "state": event_state(e)}
            for e in runtime.log.events.get(UUID(turn_id))]


def quarantined_not_offered(events: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The quarantined executors a turn would have been offered (its ``QuarantinedNotOffered``),
    each with the notice and the command every way in gives."""

    language = next((e["state"].get("language") or i18n.SOURCE for e in events if e["type"] == "TurnStarted"), i18n.SOURCE)
    return told((e for event in events if event["type"] == "QuarantinedNotOffered" for e in event["state"]["executors"]), language)


def withheld_changes(events: list[dict[str, Any]]) -> list[str]:
    """The executors with side effects a turn was not offered because the learned offer read its request as
    changing nothing (its ``PrefilterRanked``'s ``withheld``)."""
    return [name for event in events if event["type"] == "PrefilterRanked" for name in read_as_no_change(event["state"].get("ranking") or {})]


def logged_event(notification: Any, event: Any) -> dict[str, Any]:
    """One stored event as ``metnos events --json`` and the daemon's event stream show it."""
    ts = getattr(event, "timestamp", None)
    return {"id": notification.id, "aggregate_id": str(notification.originator_id), "aggregate_version": notification.originator_version,
            "topic": notification.topic, "timestamp": ts.isoformat() if ts else None, "state": event_state(event)}


def log_page(runtime: Any, after: int, topic: str = "", size: int = 500) -> tuple[list[dict[str, Any]], int]:
    """The stored events from position ``after`` on, at most ``size`` positions of them, those whose topic
    contains ``topic``; and the position to read from next."""
    log = runtime.log
    rows, next_position = [], after
    for n in log.notifications(start=after, batch=size):
        next_position = n.id + 1
        if not topic or topic in n.topic:
            rows.append(logged_event(n, log.mapper.to_domain_event(n)))
        if next_position - after >= size:
            break
    return rows, next_position


def catalogue_rows(catalogue_state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every version of every executor: its state in the lifecycle, and whether it is the current one."""
    rows = []
    for entry in sorted(catalogue_state["executors"].values(), key=lambda e: (e["name"], e["origin"])):
        for version, v in sorted(entry["versions"].items()):
            rows.append({
                "name": entry["name"], "origin": entry["origin"], "version": version,
                "current": entry["current"] == version, "state": v["state"], "digest": v["digest"],
                "summary": v["summary"], "reason": v.get("reason") or _waiting(entry["name"], v), "since": v.get("since"),
            })
    return rows


def _waiting(name: str, version: dict[str, Any]) -> str | None:
    """Why a version below threshold is listed so, and what the user may do (seeds/000 ch. 6)."""
    if version["state"] != "below_threshold":
        return None
    since = (version.get("since") or "")[:10]
    return (f"unused, below threshold since {since}; still offered: `metnos executors promote {name}` keeps it, "
            f"`metnos executors archive {name}` retires it")


def mnestome_graph(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Executors as nodes, mnests as edges weighted by their weight."""
    nodes = sorted({m["src_executor"] for m in rows} | {m["dst_executor"] for m in rows})
    edges = [{"src": m["src_executor"], "dst": m["dst_executor"], "weight": m["weight"], "uses": m["uses"], "state": m["state"]} for m in rows]
    return {"nodes": nodes, "edges": edges}


def turn_steps(runtime: Any, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn's events gathered by step: what was proposed, the policy's and the vaglio's verdicts,
    the question asked of the user and its answer, the approval, how the executor ran (and in which sandbox) and what it observed."""
    steps: dict[int, dict[str, Any]] = {}
    for e in events:
        state = e["state"]
        if "step" not in state or not isinstance(state["step"], int):
            continue
        step = steps.setdefault(state["step"], {"step": state["step"], "events": []})
        step["events"].append(e)
        kind = e["type"]
        if kind == "StepProposed":
            step.update(executor=state["executor"], args=state["args"])
        elif kind == "StepRejected":
            step["rejected"] = {"kind": state["kind"], "error": state["error"]}
        elif kind == "StepIntercepted":
            step["intercepted"] = state["decision"]
        elif kind == "StepResolved" and state.get("provenance"):
            step["provenance"] = [{"arg": arg, "from": words} for arg, words in described(state["provenance"])]
        elif kind == "StepJudged":
            step["vaglio"] = state["verdict"]
            if state.get("provenance"):
                step["provenance"] = [{"arg": arg, "from": words} for arg, words in described(state["provenance"])]
        elif kind == "ApprovalAnswered":
            step["approval"] = {"approved": state["approved"], "by": state["by"]}
        elif kind == "DialogAsked":
            step["dialog"] = {"question": state["question"], "answer": None, "by": ""}
        elif kind == "DialogAnswered" and "dialog" in step:
            step["dialog"].update(answer=state["answer"], by=state["by"])
        elif kind == "StepInvoked":
            step["invoked"] = {"ok": state["ok"], "kind": state["kind"], "version": state["version"], "exec_ms": state["exec_ms"],
                               "invocation_id": state["invocation_id"], "sandbox": _sandbox_of(runtime, state["invocation_id"])}
        elif kind == "ObservationRecorded":
            step["observation"] = {"ok": state["ok"], "observation": state["observation"]}
    return [steps[n] for n in sorted(steps)]


def _sandbox_of(runtime: Any, invocation_id: str) -> str:
    """How the invocation ran: "bwrap", "off" (METNOS_SANDBOX=off) or "unavailable", from its last event."""
    try:
        events = list(runtime.log.events.get(UUID(invocation_id)))
    except Exception:  # noqa: BLE001 - an invocation id the log does not hold shows as unknown
        return "unknown"
    return next((e.sandbox for e in reversed(events) if getattr(e, "sandbox", "")), "unknown")


def executor_detail(runtime: Any, name: str) -> dict[str, Any]:
    """An executor's versions in the catalogue and every event of its lifecycle."""
    state = runtime.catalogue.state()
    return {"versions": [r for r in catalogue_rows(state) if r["name"] == name], "history": executor_lifecycle(runtime, state, name)}


def executor_lifecycle(runtime: Any, catalogue_state: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """Every lifecycle event of the executors called ``name`` (any origin), oldest first."""
    rows = []
    for entry in catalogue_state["executors"].values():
        if entry["name"] != name:
            continue
        for e in runtime.log.events.get(UUID(entry["id"])):
            rows.append({"origin": entry["origin"], "type": type(e).__name__, "timestamp": e.timestamp.isoformat(), "state": event_state(e)})
    if not rows:
        raise ExecutorNotFound(f"there is no executor named {name!r}; see `metnos executors list`")
    return sorted(rows, key=lambda r: r["timestamp"])
