"""The executor ager: active executors nobody has invoked for N days go below threshold.

seeds/000 ch. 6: "Below threshold: usage in the last N days below the
configured threshold. The ager proposes archival. Stays loaded until the
user confirms." An executor is judged on the version that is current: it is
marked when that version has been active for at least N days and no
invocation of the executor was requested in the last N days.

Seed executors are left alone unless ``include_seeds`` is true: they are the
base vocabulary the planner composes from, used rarely but not stale.

Last use is read from the log's ``InvocationRequested`` events (a daily job;
a usage projection would make this incremental if the log grows large).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from domain.executor import ACTIVE, Executor, LifecycleError
from domain.invocation import Invocation
from eventsourcing.utils import get_topic

from metnos.runtime.jobs import CallbackContext, CallbackResult
from domain.due import parse, stamp
from uuid import UUID


def last_uses(log: Any, since_iso: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(origin, name) -> {"last": iso, "uses": requests since ``since_iso``}."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for _, event in log.domain_events(1, topics=(get_topic(Invocation.InvocationRequested),)):
        when = stamp(event.timestamp)
        entry = seen.setdefault((event.origin, event.executor), {"last": when, "uses": 0})
        entry["last"] = max(entry["last"], when)
        if when >= since_iso:
            entry["uses"] += 1
    return seen


def run_executor_ager(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    idle_days = args.get("idle_days", 30)
    if isinstance(idle_days, bool) or not isinstance(idle_days, int) or idle_days < 1:
        return CallbackResult(ok=False, kind="BadArguments", error={"message": f"idle_days must be a positive integer, got {idle_days!r}"})
    include_seeds = bool(args.get("include_seeds", False))
    runtime = ctx.runtime
    cutoff = stamp(ctx.now - timedelta(days=idle_days))
    catalogue = runtime.catalogue.catch_up(runtime.log)
    uses = last_uses(runtime.log, cutoff)
    marked: list[dict[str, Any]] = []
    aggregates = []
    for entry in sorted(catalogue["executors"].values(), key=lambda e: (e["origin"], e["name"])):
        if entry["origin"] == "seed" and not include_seeds:
            continue
        version = entry["current"]
        info = entry["versions"].get(version) if version else None
        if info is None or info["state"] != ACTIVE or not info.get("since") or stamp(parse(info["since"])) > cutoff:
            continue
        used = uses.get((entry["origin"], entry["name"]))
        if used is not None and used["last"] >= cutoff:
            continue
        executor: Executor = runtime.log.repository.get(_uuid(entry["id"]))
        try:
            executor.mark_below_threshold(version=version, uses=0, window_days=idle_days, at=ctx.now)
        except LifecycleError:
            continue
        aggregates.append(executor)
        marked.append({"name": entry["name"], "origin": entry["origin"], "version": version, "last_used": used["last"] if used else None})
    return CallbackResult(ok=True, output={"ok": True, "idle_days": idle_days, "marked": marked}, aggregates=aggregates)


def _uuid(text: str):  # noqa: ANN202

    return UUID(text)
