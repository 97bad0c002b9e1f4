"""The cascade's daily housekeeping (seeds/002 ch. 11.2, "multi_tool_maintenance").

* An approved plan not used for ``ttl_days`` (default 30) is expired, and so
  is one whose executors moved on (another version, out of service): a
  ``PlanExpired`` event with the reason.
* A pipeline of two steps or more run ``min_uses`` times (default 50: an
  approved plan's uses, a template's walks and wins) is promoted into a
  proto-mnest, from its first executor to the executor that would do the
  whole pipeline at once: synt's suggestions then see it (once; an existing
  proto-mnest is left alone).

A function of the log and the firing's date, never the wall clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from domain.mnest import Mnest, mnest_id
from domain.plan import PlanEntry
from metnos.runtime.cascade.consult import stale_reason
from metnos.runtime.mnestome import source as mnest_source
from metnos.runtime.mnestome.record import desired_signature
from metnos.runtime.jobs import CallbackContext, CallbackResult
from metnos.runtime.step.shape import verb_of
from projections.catalog import invocable

DEFAULT_TTL_DAYS = 30
DEFAULT_MIN_USES = 50


def pipeline_name(executors: list[str]) -> str:
    """The name an executor doing the whole pipeline would have: its verbs, then the first one's object."""
    verbs = [verb_of(e) for e in executors]
    obj = executors[0].partition("_")[2] or "entries"
    return "_".join([*dict.fromkeys(verbs), obj])[:64].rstrip("_")


def run_plan_maintenance(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:

    runtime = ctx.runtime
    state = runtime.plans.catch_up(runtime.log)
    current = invocable(runtime.catalogue_state())
    ttl = timedelta(days=int(args.get("ttl_days", DEFAULT_TTL_DAYS)))
    min_uses = int(args.get("min_uses", DEFAULT_MIN_USES))
    changed: list[Any] = []
    expired: list[dict[str, str]] = []
    for entry in sorted(state["entries"].values(), key=lambda e: e["id"]):
        if entry["state"] != "approved":
            continue
        why = stale_reason(entry["plan"], current)
        if why is None and ctx.now - datetime.fromisoformat(entry["last_used"]) > ttl:
            why = f"not used for {ttl.days} days"
        if why is None:
            continue
        aggregate = runtime.log.repository.get(UUID(entry["id"]))
        aggregate.trigger_event(PlanEntry.PlanExpired, reason=why, timestamp=ctx.now)
        changed.append(aggregate)
        expired.append({"plan": entry["id"], "reason": why})
    promoted = []
    for plan, uses, request in _mature(state, min_uses):
        first = plan["steps"][0]
        desired = pipeline_name([s["executor"] for s in plan["steps"]])
        mid = mnest_id(first["executor"], first["version"], desired, None)
        if mnest_source.load(runtime.log, mid) is not None or any(getattr(m, "id", None) == mid for m in changed):
            continue
        signature = desired_signature(desired, request, sorted({k for s in plan["steps"][:1] for k in s["args"]}))
        signature["pipeline"] = [s["executor"] for s in plan["steps"]]
        changed.append(Mnest.record_proto(src=first["executor"], src_version=first["version"], desired=desired,
                                          uses=uses, at=ctx.now, tags=["cascade"], desired_signature=signature))
        promoted.append({"pipeline": signature["pipeline"], "as": desired, "uses": uses})
    return CallbackResult(ok=True, output={"ok": True, "expired": expired, "promoted": promoted}, aggregates=changed)


def _mature(state: dict[str, Any], min_uses: int):  # noqa: ANN202 - a generator of (plan, uses, request)
    for entry in sorted(state["entries"].values(), key=lambda e: e["id"]):
        if entry["state"] == "approved" and len(entry["plan"]["steps"]) >= 2 and entry["uses"] >= min_uses:
            yield entry["plan"], entry["uses"], entry["text"]
    for intent, templates in sorted(state["templates"].items()):
        for _tid, template in sorted(templates.items()):
            uses = len(template["sources"]) + template["wins"]
            if len(template["template"]["steps"]) >= 2 and uses >= min_uses:
                yield template["template"], uses, intent
