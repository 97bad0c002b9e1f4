"""The executor ager: active executors nobody has invoked for N days go below threshold,
and those below threshold come back on use or are archived after a further idle period.

seeds/000 ch. 6: "Below threshold: usage in the last N days below the
configured threshold. The ager proposes archival. Stays loaded until the
user confirms." An executor is judged on the version that is current: it is
marked when that version has been active for at least N days and no
invocation of the executor was requested in the last N days.

Seed executors are left alone unless ``include_seeds`` is true: they are the
base vocabulary the planner composes from, used rarely but not stale.

Below threshold is a state with a way back (seeds/000 ch. 6, seeds/002 ch.
11.2: "active -> deprecated after 30d idle; deprecated -> archived after
another 14d"): the version is still offered; a turn that uses it brings it
back at once (metnos/runtime/lifecycle.py), and this job brings back one used
outside a turn (a schedule, ``executors run``). One still idle
``archive_after_days`` after it was marked is archived, by the ager. The
job's output is the day's lifecycle summary: marked, revived, archived.

Last use is read from the log's ``InvocationRequested`` events (a daily job;
a usage projection would make this incremental if the log grows large).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from domain.executor import ACTIVE, BELOW_THRESHOLD, Executor, LifecycleError
from domain.invocation import Invocation
from eventsourcing.utils import get_topic

from metnos.runtime.jobs import CallbackContext, CallbackResult
from metnos.runtime.lifecycle import move_to_archive
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
    archive_after = args.get("archive_after_days", 14)
    if isinstance(archive_after, bool) or not isinstance(archive_after, int) or archive_after < 1:
        return CallbackResult(ok=False, kind="BadArguments", error={"message": f"archive_after_days must be a positive integer, got {archive_after!r}"})
    include_seeds = bool(args.get("include_seeds", False))
    runtime = ctx.runtime
    cutoff = stamp(ctx.now - timedelta(days=idle_days))
    catalogue = runtime.catalogue.catch_up(runtime.log)
    uses = last_uses(runtime.log, cutoff)
    marked: list[dict[str, Any]] = []
    revived: list[dict[str, Any]] = []
    archived: list[dict[str, Any]] = []
    archive_cutoff = stamp(ctx.now - timedelta(days=archive_after))
    aggregates = []
    for entry in sorted(catalogue["executors"].values(), key=lambda e: (e["origin"], e["name"])):
        if entry["origin"] == "seed" and not include_seeds:
            continue
        version = entry["current"]
        info = entry["versions"].get(version) if version else None
        if info is not None and info["state"] == BELOW_THRESHOLD and info.get("since"):
            changed = _below_threshold(runtime, entry, version, info, uses, archive_cutoff, ctx.now)
            if changed is not None:
                executor, row, kind = changed
                aggregates.append(executor)
                (revived if kind == "revived" else archived).append(row)
            continue
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
    return CallbackResult(ok=True, output={"ok": True, "idle_days": idle_days, "archive_after_days": archive_after, "marked": marked,
                                           "revived": revived, "archived": archived}, aggregates=aggregates)


def _below_threshold(runtime: Any, entry: dict[str, Any], version: str, info: dict[str, Any], uses: dict[tuple[str, str], dict[str, Any]],
                     archive_cutoff: str, now: Any) -> tuple[Executor, dict[str, Any], str] | None:
    """Back to active when used since it was marked; archived when idle ``archive_after_days`` since."""
    marked_at = stamp(parse(info["since"]))
    used = uses.get((entry["origin"], entry["name"]))
    executor: Executor = runtime.log.repository.get(_uuid(entry["id"]))
    row = {"name": entry["name"], "origin": entry["origin"], "version": version, "last_used": used["last"] if used else None}
    try:
        if used is not None and used["last"] > marked_at:
            executor.revive(version=version, by="use", reason=f"used again on {used['last'][:10]}", at=now)
            return executor, row, "revived"
        if marked_at <= archive_cutoff:
            executor.archive(version=version, by="ager", at=now,
                             reason=f"below threshold since {marked_at[:10]} and still not used")
            move_to_archive(runtime.workspace, entry["origin"], entry["name"], version)
            return executor, row, "archived"
    except LifecycleError:
        return None
    return None


def _uuid(text: str):  # noqa: ANN202

    return UUID(text)
