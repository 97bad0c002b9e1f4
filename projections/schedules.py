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
from typing import Any

from domain.schedule import ACTIVE, CANCELLED, COMPLETED, PAUSED, Schedule
from metnos.scheduler.due import BadSchedule, wake_at
from projections.base import Fold, Handler, iso

_EVENTS = (
    Schedule.ScheduleCreated,
    Schedule.SchedulePaused,
    Schedule.ScheduleResumed,
    Schedule.ScheduleModified,
    Schedule.FiringStarted,
    Schedule.FiringFinished,
    Schedule.FiringSkipped,
    Schedule.ScheduleCompleted,
    Schedule.ScheduleCancelled,
)


class SchedulesFold(Fold):
    name = "schedules"
    version = 1

    def initial(self) -> dict[str, Any]:
        return {"schedules": {}, "index": []}

    def handlers(self) -> dict[type, Handler]:
        # One body reads them all: these events are few beside a turn's.
        return dict.fromkeys(_EVENTS, self._apply)

    def _apply(self, state: dict[str, Any], event: Any, position: int) -> None:
        key = str(event.originator_id)
        schedules = state["schedules"]
        when = iso(event.timestamp)
        if isinstance(event, Schedule.ScheduleCreated):
            schedules[key] = {
                "id": key, "label": event.label, "owner": event.owner, "target": event.target, "args": event.args,
                "cron": event.cron, "timezone": event.timezone, "channel": event.channel, "count": event.count,
                "expiry": event.expiry, "on_failure": event.on_failure,
                "max_consecutive_failures": event.max_consecutive_failures, "grace_s": event.grace_s,
                "status": PAUSED if event.paused else ACTIVE, "cursor": event.since, "created": when,
                "fired": 0, "ok": 0, "failed": 0, "consecutive_failures": 0, "manual_runs": 0,
                "open": None, "last": None, "closed_reason": None, "wake": None, "next_fire": None, "position": position,
            }
            _reindex(state, schedules[key])
            return
        s = schedules.get(key)
        if s is None:
            return
        s["position"] = position
        if isinstance(event, Schedule.SchedulePaused):
            s["status"] = PAUSED
        elif isinstance(event, Schedule.ScheduleResumed):
            s["status"] = ACTIVE
            s["cursor"] = max(s["cursor"], event.since)
        elif isinstance(event, Schedule.ScheduleModified):
            s.update(event.changes)
            if "cron" in event.changes or "timezone" in event.changes:
                s["cursor"] = max(s["cursor"], event.since)
        elif isinstance(event, Schedule.FiringStarted):
            s["open"] = {"slot": event.slot, "attempt": event.attempt, "phase": "running", "manual": event.manual, "recovery": event.recovery}
            if not event.manual:
                s["cursor"] = max(s["cursor"], event.slot)
        elif isinstance(event, Schedule.FiringFinished):
            manual = bool(s["open"] and s["open"].get("manual"))
            if not event.final:
                s["open"] = {"slot": event.slot, "attempt": event.attempt, "phase": "retry", "manual": manual, "recovery": False}
            else:
                s["open"] = None
                s["last"] = {"slot": event.slot, "ok": event.ok, "kind": event.kind, "attempt": event.attempt, "action": event.action, "at": when, "manual": manual}
                if manual:
                    s["manual_runs"] += 1
                else:
                    s["fired"] += 1
                    s["ok" if event.ok else "failed"] += 1
                    s["consecutive_failures"] = 0 if event.ok else s["consecutive_failures"] + 1
        elif isinstance(event, Schedule.FiringSkipped):
            s["cursor"] = max(s["cursor"], event.last)
            s["skipped"] = s.get("skipped", 0) + event.missed
        elif isinstance(event, Schedule.ScheduleCompleted):
            s["status"] = COMPLETED
            s["closed_reason"] = event.reason
        elif isinstance(event, Schedule.ScheduleCancelled):
            s["status"] = CANCELLED
            s["closed_reason"] = event.reason
        _reindex(state, s)


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
