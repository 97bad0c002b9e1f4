"""What each dashboard page shows: for each path, its template and a function of the request to the template's context.

The functions read through the same services as the API (metnos.services:
queries, schedules, mnestome); the pages' buttons call the API.
"""

from __future__ import annotations

import math
from typing import Any

from metnos.services import inbox, mnestome as mnests, queries, schedules as schedule_service
from metnos.services.host import DaemonHost
from metnos.services.telling import withheld_told, without_status

GRAPH_SIZE = 640


def timeline(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        with host.reading() as rt:
            rows = queries.turn_rows(queries.turns_now(rt), 200)
        # The outbox as the daemon's worker keeps it, not folded from the log at every look. A turn running now
        # is listed from the daemon's live view: the log learns of it when it commits.
        running = host.live.running()
        shown = {t["id"] for t in running}
        return {"turns": running + [t for t in reversed(rows) if t["id"] not in shown],
                "undelivered": {m["turn_id"] for m in host.outbox.undelivered()}}

    return gather


def conversation(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        with host.reading() as rt:
            turns = queries.conversation_turns(queries.turns_now(rt), request.path_params["conversation_id"])
        return {"conversation": request.path_params["conversation_id"], "turns": turns}

    return gather


def turn(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        running = host.live.find(request.path_params["turn_id"])
        if running is not None:
            # Running now: drawn from the live view, step by step (dashboard.js), until it ends and is recorded.
            summary = next((t for t in host.live.running() if t["id"] == running), None)
            if summary is not None:
                return {"turn": {**summary, "result": None, "undone": False, "conversation": None}, "live": True,
                        "events": [], "steps": [], "ungrounded": {}, "why_unverified": "", "quarantined": [], "withheld_changes": [], "undelivered": []}
        with host.reading() as rt:
            state = queries.turns_now(rt)
            turn_id = queries.find_turn(state, request.path_params["turn_id"])
            events = queries.turn_events(rt, turn_id)
            steps = queries.turn_steps(rt, events)
        # An unverified turn's text and the parts found in no result are on its last AnswerUngrounded.
        ungrounded = next((e["state"] for e in reversed(events) if e["type"] == "AnswerUngrounded"), {})
        summary = state["turns"][turn_id]
        return {"turn": summary, "events": events, "steps": steps, "ungrounded": ungrounded,
                "why_unverified": without_status(summary.get("result") or ""),
                "quarantined": queries.quarantined_not_offered(events),
                # As the CLI tells them: only when the turn did not answer.
                "withheld_changes": withheld_told(summary["status"], queries.withheld_changes(events)),
                "undelivered": host.outbox.undelivered(turn_id)}

    return gather


def approvals(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        # A turn's question (the atomic dialog) waits here too, with a box for the answer.
        # And what the outbox gave up on, to retry or dismiss: the one inbox (metnos/services/inbox.py).
        return {"pending": host.approvals.pending(), "questions": host.dialogs.pending(),
                "undelivered": [i for i in inbox.items(host) if i["kind"] == inbox.UNDELIVERED]}

    return gather


def schedules(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        with host.reading() as rt:
            return {"schedules": schedule_service.rows(rt)}

    return gather


def executors(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        with host.reading() as rt:
            return {"executors": queries.catalogue_rows(queries.catalogue_now(rt))}

    return gather


def executor(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        name = request.path_params["name"]
        with host.reading() as rt:
            return {"name": name, **queries.executor_detail(rt, name)}

    return gather


def mnestome(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        with host.reading() as rt:
            rows = mnests.served(rt, 300)
        return {"mnests": rows, "drawing": circle_drawing(queries.mnestome_graph(rows))}

    return gather


def circle_drawing(graph: dict[str, Any], size: int = GRAPH_SIZE) -> dict[str, Any]:
    """Executors on a circle, each mnest a line between them as thick as it is strong (an SVG, no script)."""
    nodes = graph["nodes"]
    centre, radius = size / 2, size / 2 - 90
    at = {}
    for i, name in enumerate(nodes):
        angle = 2 * math.pi * i / max(1, len(nodes)) - math.pi / 2
        at[name] = (round(centre + radius * math.cos(angle), 1), round(centre + radius * math.sin(angle), 1))
    edges = []
    for e in graph["edges"]:
        (x1, y1), (x2, y2) = at[e["src"]], at[e["dst"]]
        # The line stops short of the target's dot, so that its arrowhead shows which way the data went.
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        x2, y2 = x2 - (x2 - x1) * 10 / length, y2 - (y2 - y1) * 10 / length
        edges.append({**e, "x1": x1, "y1": y1, "x2": round(x2, 1), "y2": round(y2, 1),
                      "width": round(0.5 + 6 * max(0.0, min(1.0, e["weight"])), 2)})
    return {"size": size, "nodes": [{"name": n, "x": at[n][0], "y": at[n][1], "right": at[n][0] >= centre} for n in nodes], "edges": edges}


def events(host: DaemonHost) -> Any:
    def gather(request: Any) -> dict[str, Any]:
        with host.reading() as rt:
            last = queries.log_head(rt)
        return {"after": max(0, last - 50)}

    return gather


PAGES = [
    ("/", "timeline.html.jinja", timeline),
    ("/turns/{turn_id}", "turn.html.jinja", turn),
    ("/conversations/{conversation_id}", "conversation.html.jinja", conversation),
    ("/approvals", "approvals.html.jinja", approvals),
    ("/schedules", "schedules.html.jinja", schedules),
    ("/executors", "executors.html.jinja", executors),
    ("/executors/{name}", "executor.html.jinja", executor),
    ("/mnestome", "mnestome.html.jinja", mnestome),
    ("/events", "events.html.jinja", events),
]
