"""The ager (seeds/004 ch. 6, 7, 9): what time alone does to the mnestome.

``age(source, at)`` is a function of the log and a date. For every mnest
still in the graph it computes the weight at ``at`` with the decay formula
and records, as events on the Mnest aggregates it returns:

* ``MnestDecayed`` when the weight has lost at least ``DECAY_STEP`` since it
  was last written, or before any change of state, so the mnestome view
  shows a weight no older than that without an event a day per mnest;
* ``MnestDemoted``: an active mnest under the decay threshold (0.20);
* ``MnestArchiveProposed``: a decaying mnest under the archive threshold
  (0.05) and idle for 90 days; archiving itself is the user's decision;
* ``ProtoMnestPurged``: a proto-mnest under the proto threshold (0.05);
* ``MnestArchived``: a superseded mnest past its grace period.

A mnest last written after ``at`` is left alone: time does not run backwards.
Running the ager twice at the same date records nothing the second time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from domain import mnest_weight as mw
from domain.mnest import ACTIVE, DECAYING, PROTO, SUPERSEDED, Mnest
from metnos.runtime.mnestome import source as src_mod

DECAY_STEP = 0.01
BY = "ager"


def plan(state: dict[str, Any], at: datetime) -> list[tuple[str, list[str]]]:
    """(mnest id, the actions due) for every mnest the ager would touch, in id order."""
    due: list[tuple[str, list[str]]] = []
    for mid in sorted(state["mnests"]):
        m = state["mnests"][mid]
        if m["state"] not in (PROTO, ACTIVE, DECAYING, SUPERSEDED):
            continue
        since = datetime.fromisoformat(m["weight_at"])
        if at < since:
            continue
        now = mw.weight_at(m["weight"], since, at, m["decay_lambda"])
        actions: list[str] = []
        if m["state"] == ACTIVE and now < mw.DECAY_WEIGHT:
            actions.append("demote")
        if m["state"] in (ACTIVE, DECAYING) and not m["archive_proposed"] and now < mw.ARCHIVE_WEIGHT:
            if mw.days_between(datetime.fromisoformat(m["ts_last"]), at) >= mw.ARCHIVE_IDLE_DAYS:
                actions.append("propose_archive")
        if m["state"] == PROTO and now < mw.MIN_PROTO_WEIGHT:
            actions.append("purge")
        if m["state"] == SUPERSEDED and m["superseded_at"]:
            if mw.days_between(datetime.fromisoformat(m["superseded_at"]), at) >= mw.SUPERSEDED_GRACE_DAYS:
                actions.append("archive")
        if actions or m["weight"] - now >= DECAY_STEP:
            due.append((mid, ["decay", *actions]))
    return due


def age(source: Any, at: datetime, *, state: dict[str, Any] | None = None) -> list[Mnest]:
    """The Mnest aggregates the passing of time changes at ``at``, events pending."""
    log = src_mod.log_of(source)
    state = state if state is not None else src_mod.mnestome_state(source)
    out: list[Mnest] = []
    for mid, actions in plan(state, at):
        mnest = src_mod.load(log, UUID(mid))
        if mnest is None:
            continue
        for action in actions:
            if action == "decay":
                mnest.decay(at=at)
            elif action == "demote":
                mnest.demote(at=at)
            elif action == "propose_archive":
                mnest.propose_archive(at=at)
            elif action == "purge":
                mnest.purge(at=at)
            elif action == "archive":
                mnest.archive(at=at, reason=f"superseded for {mw.SUPERSEDED_GRACE_DAYS} days", by=BY)
        out.append(mnest)
    return out
