"""Builtin maintenance jobs: callbacks resolved by a string key (seeds/002 ch. 11.2.1).

A schedule whose target is ``{"kind": "callback", "key": ...}`` stores only
the key; the dispatcher looks it up here when the slot fires. No callable is
ever serialised, so a restart never meets a stale reference, and a key
whose code is not (yet) there fails cleanly instead of crashing the tick.

``_unavailable`` is the placeholder for a job whose subsystem is missing: it
reports ``unavailable`` as a success, so a missing subsystem never counts
towards auto-cancel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from metnos.runtime.cascade import maintenance as plan_maintenance
from metnos.runtime.scheduler import ager, lifecycle_summary, maintenance
from metnos.runtime.skills import watchdog
from metnos.runtime.synt import apply, cleanup, eta, promoter
from metnos.runtime import translation
from metnos.runtime.jobs import Callback, CallbackContext, CallbackResult

__all__ = ["BUILTIN_JOBS", "BuiltinJob", "Callback", "CallbackContext", "CallbackResult", "keys", "register", "resolve"]


_REGISTRY: dict[str, Callback] = {}


def register(key: str) -> Callable[[Callback], Callback]:
    def add(fn: Callback) -> Callback:
        _REGISTRY[key] = fn
        return fn

    return add


def resolve(key: str) -> Callback | None:
    return _REGISTRY.get(key) or _BUILTINS.get(key)


def keys() -> list[str]:
    return sorted(set(_REGISTRY) | set(_BUILTINS))


@dataclass(frozen=True)
class BuiltinJob:
    key: str
    cron: str
    label: str
    args: dict[str, Any] = field(default_factory=dict)
    # A machine asleep at 03:30 still ages its executors when it wakes that morning.
    grace_s: int = 6 * 3600
    # Where a job's ``content`` is told: "none" for the jobs that only change or record,
    # the outbox (the user's inbox; `schedule modify` can move it) for those the seeds tell.
    channel: str = "none"


BUILTIN_JOBS = (
    BuiltinJob("executor_ager", "30 3 * * *", "executor ager: mark executors idle for 30 days below threshold", {"idle_days": 30}),
    BuiltinJob("mnest_ager", "0 4 * * *", "mnestome ager: decay, demote, purge proto-mnests"),
    BuiltinJob("synt_suggest", "30 4 * * *", "synt suggestions for recurring proto-mnests (uses >= 3, weight >= 0.30)"),
    BuiltinJob("plan_maintenance", "30 4 * * *", "cascade: expire plans unused for 30 days or stale, promote pipelines used 50 times to proto-mnests",
               {"ttl_days": 30, "min_uses": 50}),
    BuiltinJob("synt_introspect", "0 5 * * *", "synt's introspective cascade: merge, generalise, specialise proposals; fused executors no mnest cites archived"),
    BuiltinJob("proposals_eta", "30 4 * * *", "proposals' ETA: p50 and p95 of the turns' duration per path shape, last 7 days", {"days": 7}),
    BuiltinJob("promoter", "45 4 * * *", "promoter: a verdict on each draft waiting for the code approval (six killers, seven signals)"),
    BuiltinJob("introspection_apply", "30 5 * * *", "introspection proposals the user accepted: draft, test or install up to the next gate"),
    BuiltinJob("proposals_cleanup", "0 6 * * *", "proposals' clean-up: close the ones unanswered for 30 days and the duplicates (nothing deleted)",
               {"max_age_days": 30}),
    BuiltinJob("lifecycle_summary", "30 6 * * *", "lifecycle summary: what the agers and the maintenance changed in the last 24 hours",
               {"hours": 24}, channel="outbox"),
    BuiltinJob("skill_sandbox_watchdog", "35 6 * * *", "sandbox watchdog: a sandbox per skill from 5 third-party skills or 1 guest",
               channel="outbox"),
    BuiltinJob("promoter_digest", "0 7 * * *", "promoter's digest: the drafts promoted and waiting for your approval", channel="outbox"),
    BuiltinJob("i18n_translate_pending", "0 2 * * *", "translations: draft up to 20 missing or stale texts through the model, for review",
               {"limit": 20}),
)


def _unavailable(what: str) -> Callback:
    def run(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
        return CallbackResult(ok=True, kind="unavailable", output={"ok": True, "status": "unavailable", "message": f"{what} is not available yet in this runtime"})

    return run


# The builtin jobs' code; a key registered under the same name first wins.
_BUILTINS: dict[str, Callback] = {
    "executor_ager": ager.run_executor_ager,
    "mnest_ager": maintenance.run_mnest_ager,
    "synt_suggest": maintenance.run_synt_suggest,
    "plan_maintenance": plan_maintenance.run_plan_maintenance,
    "synt_introspect": maintenance.run_synt_introspect,
    "proposals_eta": eta.run_proposals_eta,
    "promoter": promoter.run_promoter,
    "introspection_apply": apply.run_introspection_apply,
    "proposals_cleanup": cleanup.run_proposals_cleanup,
    "lifecycle_summary": lifecycle_summary.run_lifecycle_summary,
    "skill_sandbox_watchdog": watchdog.run_skill_sandbox_watchdog,
    "promoter_digest": promoter.run_promoter_digest,
    "i18n_translate_pending": translation.run_i18n_translate_pending,
}
