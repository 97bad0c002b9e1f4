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
from metnos.runtime.scheduler import ager, maintenance
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


BUILTIN_JOBS = (
    BuiltinJob("executor_ager", "30 3 * * *", "executor ager: mark executors idle for 30 days below threshold", {"idle_days": 30}),
    BuiltinJob("mnest_ager", "0 4 * * *", "mnestome ager: decay, demote, purge proto-mnests"),
    BuiltinJob("synt_suggest", "30 4 * * *", "synt suggestions for recurring proto-mnests (uses >= 3, weight >= 0.30)"),
    BuiltinJob("plan_maintenance", "30 4 * * *", "cascade: expire plans unused for 30 days or stale, promote pipelines used 50 times to proto-mnests",
               {"ttl_days": 30, "min_uses": 50}),
    BuiltinJob("synt_introspect", "0 5 * * *", "synt's introspective cascade: merge, generalise, specialise proposals; fused executors no mnest cites archived"),
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
}
