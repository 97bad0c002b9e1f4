"""The executor catalogue: every executor, its versions, their states, the current one.

The planner reads the catalogue to know what it may call; `metnos executors
list` prints it. A quarantined or archived version is listed with its reason
and never offered.
"""

from __future__ import annotations

from typing import Any

from domain.executor import ACTIVE, Executor
from projections.base import Fold, Handler, iso, key_of

_EVENTS = (
    Executor.ExecutorRegistered,
    Executor.VersionRegistered,
    Executor.ExecutorSigned,
    Executor.ExecutorVerified,
    Executor.ExecutorActivated,
    Executor.ExecutorQuarantined,
    Executor.ExecutorRehabilitated,
    Executor.VersionPromoted,
    Executor.ExecutorBelowThreshold,
    Executor.ExecutorFused,
    Executor.ExecutorArchived,
)


class CatalogueFold(Fold):
    name = "catalogue"
    version = 1

    def initial(self) -> dict[str, Any]:
        return {"executors": {}, "ids": {}}

    def handlers(self) -> dict[type, Handler]:
        # One body reads them all: these events are few beside a turn's.
        return dict.fromkeys(_EVENTS, self._apply)

    def _apply(self, state: dict[str, Any], event: Any, position: int) -> None:
        executors = state["executors"]
        if isinstance(event, Executor.ExecutorRegistered):
            state["ids"][key_of(event.originator_id)] = f"{event.origin}/{event.name}"
            executors[f"{event.origin}/{event.name}"] = {
                "name": event.name,
                "origin": event.origin,
                "id": key_of(event.originator_id),
                "current": None,
                "versions": {},
            }
            return
        entry = executors.get(state["ids"].get(key_of(event.originator_id), ""))
        if entry is None:
            return
        versions = entry["versions"]
        when = iso(event.timestamp)
        if isinstance(event, Executor.VersionRegistered):
            versions[event.version] = {"state": "registered", "digest": event.digest, "summary": event.summary, "reason": None, "check": None, "since": when}
            return
        version = versions.get(event.version)
        if version is None:
            return
        kind = type(event)
        if kind is Executor.VersionPromoted:
            entry["current"] = event.version
            return
        new_state = _STATE_AFTER[kind]
        version["state"] = new_state
        version["since"] = when
        if kind is Executor.ExecutorQuarantined:
            version["reason"] = event.reason
            version["check"] = event.check
        elif kind is Executor.ExecutorArchived:
            version["reason"] = event.reason
        elif new_state == ACTIVE:
            version["reason"] = None
            version["check"] = None
        if kind in (Executor.ExecutorSigned, Executor.ExecutorVerified, Executor.ExecutorRehabilitated):
            version["digest"] = event.digest


_STATE_AFTER = {
    Executor.ExecutorSigned: "signed",
    Executor.ExecutorVerified: "verified",
    Executor.ExecutorActivated: ACTIVE,
    Executor.ExecutorQuarantined: "quarantined",
    Executor.ExecutorRehabilitated: ACTIVE,
    Executor.ExecutorBelowThreshold: "below_threshold",
    Executor.ExecutorFused: "fused",
    Executor.ExecutorArchived: "archived",
}


def invocable(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> entry of the current, active version, seeds first (never shadowed)."""
    chosen: dict[str, dict[str, Any]] = {}
    order = {"seed": 0, "builtin": 0, "synt": 1, "skill": 2}
    for entry in sorted(state["executors"].values(), key=lambda e: (order.get(e["origin"], 3), e["name"])):
        current = entry["current"]
        if current is None or entry["name"] in chosen:
            continue
        if entry["versions"].get(current, {}).get("state") == ACTIVE:
            chosen[entry["name"]] = {**entry, "version": current, **entry["versions"][current]}
    return chosen
