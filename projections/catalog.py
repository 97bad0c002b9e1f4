"""The executor catalogue: every executor, its versions, their states, the current one.

The planner reads the catalogue to know what it may call; `metnos executors
list` prints it. A quarantined or archived version is listed with its reason
and never offered; a version below threshold is still offered (seeds/000 ch. 6:
it stays loaded until the user confirms).
"""

from __future__ import annotations

from typing import Any

from domain.executor import ACTIVE, BELOW_THRESHOLD, Executor
from metnos.mechanisms.store.event_record import Record
from projections.base import Fold, Handler

class CatalogueFold(Fold):
    name = "catalogue"
    version = 1

    def initial(self) -> dict[str, Any]:
        return {"executors": {}, "ids": {}}

    def handlers(self) -> dict[type, Handler]:
        return {
            Executor.ExecutorRegistered: _registered,
            Executor.VersionRegistered: _version_registered,
            Executor.VersionPromoted: _promoted,
            Executor.ExecutorSigned: _moved_to("signed", digest=True),
            Executor.ExecutorVerified: _moved_to("verified", digest=True),
            Executor.ExecutorActivated: _moved_to(ACTIVE),
            Executor.ExecutorQuarantined: _moved_to("quarantined", reason=True, check=True),
            Executor.ExecutorRehabilitated: _moved_to(ACTIVE, digest=True),
            Executor.ExecutorBelowThreshold: _moved_to(BELOW_THRESHOLD),
            Executor.ExecutorRevived: _moved_to(ACTIVE),
            Executor.ExecutorFused: _moved_to("fused"),
            Executor.ExecutorDefused: _moved_to(ACTIVE),
            Executor.ExecutorArchived: _moved_to("archived", reason=True),
        }


def _registered(state: dict[str, Any], record: Record, position: int) -> None:
    name = f"{record['origin']}/{record['name']}"
    state["ids"][record["originator_id"]] = name
    state["executors"][name] = {
        "name": record["name"],
        "origin": record["origin"],
        "id": record["originator_id"],
        "current": None,
        "versions": {},
    }


def _entry(state: dict[str, Any], record: Record) -> dict[str, Any] | None:
    return state["executors"].get(state["ids"].get(record["originator_id"], ""))


def _version_registered(state: dict[str, Any], record: Record, position: int) -> None:
    entry = _entry(state, record)
    if entry is not None:
        entry["versions"][record["version"]] = {
            "state": "registered", "digest": record["digest"], "summary": record["summary"],
            "reason": None, "check": None, "since": record["timestamp"],
        }


def _promoted(state: dict[str, Any], record: Record, position: int) -> None:
    entry = _entry(state, record)
    if entry is not None and record["version"] in entry["versions"]:
        entry["current"] = record["version"]


def _moved_to(new_state: str, *, reason: bool = False, check: bool = False, digest: bool = False) -> Handler:
    """A handler moving a version to ``new_state``, keeping the event's reason, check or digest."""

    def move(state: dict[str, Any], record: Record, position: int) -> None:
        entry = _entry(state, record)
        version = None if entry is None else entry["versions"].get(record["version"])
        if version is None:
            return
        version["state"] = new_state
        version["since"] = record["timestamp"]
        if reason:
            version["reason"] = record["reason"]
        if check:
            version["check"] = record["check"]
        if new_state == ACTIVE:
            version["reason"] = None
            version["check"] = None
        if digest:
            version["digest"] = record["digest"]

    return move


# The states a current version is offered in.
OFFERED = (ACTIVE, BELOW_THRESHOLD)


def invocable(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> entry of the current, offered version (active, or below threshold), seeds first (never shadowed)."""
    chosen: dict[str, dict[str, Any]] = {}
    order = {"seed": 0, "builtin": 0, "synt": 1, "skill": 2}
    for entry in sorted(state["executors"].values(), key=lambda e: (order.get(e["origin"], 3), e["name"])):
        current = entry["current"]
        if current is None or entry["name"] in chosen:
            continue
        if entry["versions"].get(current, {}).get("state") in OFFERED:
            chosen[entry["name"]] = {**entry, "version": current, **entry["versions"][current]}
    return chosen
