"""The daily lifecycle summary (seeds/002 ch. 11.2, ``lifecycle_summary``): read only.

What the agers and the maintenance changed in the last ``hours`` hours (24
by default), counted from the lifecycle events in the log: executors gone
below threshold, archived, fused, quarantined, active again; mnests decayed,
demoted, proposed for archive, archived, purged; plans expired or forgotten;
proposals closed. Executors are named. The figures are a DigestWritten
event, and a day with any change is told on the schedule's channel.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta
from typing import Any

from eventsourcing.utils import get_topic

from domain.executor import Executor
from domain.mnest import Mnest
from domain.plan import PlanEntry
from domain.proposal import Proposal
from metnos.runtime.jobs import CallbackContext, CallbackResult, digest

JOB = "lifecycle_summary"
HOURS = 24

# (subject, what the user reads) for each lifecycle event counted.
TRANSITIONS: dict[type, tuple[str, str]] = {
    Executor.ExecutorBelowThreshold: ("executors", "below threshold"),
    Executor.ExecutorArchived: ("executors", "archived"),
    Executor.ExecutorFused: ("executors", "fused"),
    Executor.ExecutorDefused: ("executors", "defused"),
    Executor.ExecutorQuarantined: ("executors", "quarantined"),
    Executor.ExecutorRehabilitated: ("executors", "rehabilitated"),
    Executor.ExecutorActivated: ("executors", "activated"),
    Mnest.MnestDecayed: ("mnests", "decayed"),
    Mnest.MnestDemoted: ("mnests", "demoted"),
    Mnest.MnestArchiveProposed: ("mnests", "proposed for archive"),
    Mnest.MnestArchived: ("mnests", "archived"),
    Mnest.ProtoMnestPurged: ("mnests", "purged"),
    PlanEntry.PlanExpired: ("plans", "expired"),
    PlanEntry.PlanForgotten: ("plans", "forgotten"),
    Proposal.ProposalRejected: ("proposals", "rejected"),
    Proposal.ProposalFailed: ("proposals", "failed"),
    Proposal.ExecutorInstalled: ("proposals", "installed"),
}


def summarise(runtime: Any, since: Any, until: Any) -> dict[str, dict[str, Any]]:
    catalogue = runtime.catalogue_state()
    names = {eid: catalogue["executors"][key]["name"] for eid, key in catalogue["ids"].items() if key in catalogue["executors"]}
    counts: dict[str, Counter] = defaultdict(Counter)
    named: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    topics = tuple(get_topic(cls) for cls in TRANSITIONS)
    for _, event in runtime.log.domain_events(1, topics=topics):
        if not since < event.timestamp <= until:
            continue
        subject, label = TRANSITIONS[type(event)]
        counts[subject][label] += 1
        if subject == "executors":
            named[subject][label].append(names.get(str(event.originator_id), str(event.originator_id)))
    return {subject: {label: {"count": n, **({"names": sorted(set(named[subject][label]))} if named[subject][label] else {})}
                      for label, n in sorted(c.items())}
            for subject, c in sorted(counts.items())}


def text_of(summary: dict[str, dict[str, Any]], hours: int) -> str:
    if not summary:
        return ""
    parts = []
    for subject, labels in summary.items():
        said = [f"{v['count']} {label}" + (f" ({', '.join(v['names'])})" if v.get("names") else "") for label, v in labels.items()]
        parts.append(f"{subject}: {', '.join(said)}")
    return f"Lifecycle, last {hours} h: " + "; ".join(parts)


def run_lifecycle_summary(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    hours = args.get("hours", HOURS)
    if isinstance(hours, bool) or not isinstance(hours, int) or hours < 1:
        return CallbackResult(ok=False, kind="BadArguments", error={"message": f"hours must be a positive integer, got {hours!r}"})
    summary = summarise(ctx.runtime, ctx.now - timedelta(hours=hours), ctx.now)
    return digest(ctx, JOB, {"hours": hours, "transitions": summary}, text_of(summary, hours))
