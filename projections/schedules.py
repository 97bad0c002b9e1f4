"""The schedule store: every schedule's state, counts and next firing, from its events.

This is what `metnos schedule list` prints and what a daemon tick reads to
find the schedules it must look at. ``index`` is a list of ``[wake, id]``
kept sorted, where ``wake`` is the next slot (or the expiry, if sooner) of
an active schedule, or its cursor while a firing is open: a tick takes the
prefix with ``wake <= now`` by bisection instead of asking cron about every
schedule. The aggregate in the log stays the source of truth for a firing;
the index only says where to look.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from typing import Any

from domain.schedule import ACTIVE, CANCELLED, COMPLETED, PAUSED, Schedule
from domain.due import BadSchedule, wake_at
from metnos.mechanisms.store.event_record import Record
from projections.base import Fold, Handler

class SchedulesFold(Fold):
    name = "schedules"
    version = 2

    def initial(self) -> dict[str, Any]:
        return {"schedules": {}, "index": []}

    def handlers(self) -> dict[type, Handler]:
        return {
            Schedule.ScheduleCreated: _created,
            Schedule.ScheduleApproved: _changes(_approved),
            Schedule.SchedulePaused: _changes(_paused),
            Schedule.ScheduleResumed: _changes(_resumed),
            Schedule.ScheduleModified: _changes(_modified),
            Schedule.FiringStarted: _changes(_firing_started),
            Schedule.FiringFinished: _changes(_firing_finished),
            Schedule.FiringSkipped: _changes(_firing_skipped),
            Schedule.ScheduleCompleted: _changes(_closed(COMPLETED)),
            Schedule.ScheduleCancelled: _changes(_closed(CANCELLED)),
        }


def _created(state: dict[str, Any], e: Record, position: int) -> None:
    key = e["originator_id"]
    state["schedules"][key] = s = {
        "id": key, "label": e["label"], "owner": e["owner"], "target": e["target"], "args": e["args"],
        "cron": e["cron"], "timezone": e["timezone"], "channel": e["channel"], "count": e["count"],
        "expiry": e["expiry"], "on_failure": e["on_failure"],
        "max_consecutive_failures": e["max_consecutive_failures"], "grace_s": e["grace_s"],
        "status": PAUSED if e["paused"] else ACTIVE, "cursor": e["since"], "created": e["timestamp"],
        "fired": 0, "ok": 0, "failed": 0, "consecutive_failures": 0, "manual_runs": 0,
        "open": None, "approval": None, "last": None, "closed_reason": None, "wake": None, "next_fire": None, "position": position,
    }
    if e.get("actor", "host") != "host":
        # Only a guest's schedule says whose it is: the host's rows keep the shape they always had.
        s["actor"] = e["actor"]
    _reindex(state, s)


Change = Callable[[dict[str, Any], Record], None]


def _changes(change: Change) -> Handler:
    """A handler applying ``change(schedule, record)`` to a known schedule, then re-indexing it."""

    def handle(state: dict[str, Any], e: Record, position: int) -> None:
        s = state["schedules"].get(e["originator_id"])
        if s is None:
            return
        s["position"] = position
        change(s, e)
        _reindex(state, s)

    return handle


def _approved(s: dict[str, Any], e: Record) -> None:
    s["approval"] = {"template": e["template"], "executors": e["executors"], "by": e["by"], "turn_id": e["turn_id"]}


def _paused(s: dict[str, Any], e: Record) -> None:
    s["status"] = PAUSED


def _resumed(s: dict[str, Any], e: Record) -> None:
    s["status"] = ACTIVE
    s["cursor"] = max(s["cursor"], e["since"])


def _modified(s: dict[str, Any], e: Record) -> None:
    s.update(e["changes"])
    if "cron" in e["changes"] or "timezone" in e["changes"]:
        s["cursor"] = max(s["cursor"], e["since"])


def _firing_started(s: dict[str, Any], e: Record) -> None:
    s["open"] = {"slot": e["slot"], "attempt": e["attempt"], "phase": "running", "manual": e["manual"], "recovery": e["recovery"]}
    if not e["manual"]:
        s["cursor"] = max(s["cursor"], e["slot"])


def _firing_finished(s: dict[str, Any], e: Record) -> None:
    manual = bool(s["open"] and s["open"].get("manual"))
    if not e["final"]:
        s["open"] = {"slot": e["slot"], "attempt": e["attempt"], "phase": "retry", "manual": manual, "recovery": False}
        return
    s["open"] = None
    s["last"] = {"slot": e["slot"], "ok": e["ok"], "kind": e["kind"], "attempt": e["attempt"], "action": e["action"], "at": e["timestamp"], "manual": manual}
    if manual:
        s["manual_runs"] += 1
    else:
        s["fired"] += 1
        s["ok" if e["ok"] else "failed"] += 1
        s["consecutive_failures"] = 0 if e["ok"] else s["consecutive_failures"] + 1


def _firing_skipped(s: dict[str, Any], e: Record) -> None:
    s["cursor"] = max(s["cursor"], e["last"])
    s["skipped"] = s.get("skipped", 0) + e["missed"]


def _closed(status: str) -> Change:
    def close(s: dict[str, Any], e: Record) -> None:
        s["status"] = status
        s["closed_reason"] = e["reason"]

    return close


def _reindex(state: dict[str, Any], s: dict[str, Any]) -> None:
    index = state["index"]
    old = s["wake"]
    if old is not None:
        at = bisect_left(index, [old, s["id"]])
        if at < len(index) and index[at] == [old, s["id"]]:
            del index[at]
    s["next_fire"] = None
    wake = None
    if s["open"] is not None:
        # An open firing (interrupted, or a retry owed) wants the next tick.
        wake = s["cursor"]
    elif s["status"] == ACTIVE:
        try:
            wake = wake_at(s["cron"], s["timezone"], s["cursor"], s["expiry"])
        except BadSchedule:
            wake = None
        if wake is not None and (s["expiry"] is None or wake < s["expiry"]):
            s["next_fire"] = wake
        if s["count"] is not None and s["fired"] >= s["count"]:
            # Count reached but not yet marked completed: the tick closes it.
            wake = s["cursor"]
            s["next_fire"] = None
    s["wake"] = wake
    if wake is not None:
        insort(index, [wake, s["id"]])


def due_ids(state: dict[str, Any], now: str) -> list[str]:
    """Ids of the schedules a tick at ``now`` must look at, soonest first."""
    index = state["index"]
    # "~" sorts after every id, so equal wake times are included.
    end = bisect_left(index, [now, "~"])
    return [entry[1] for entry in index[:end]]
