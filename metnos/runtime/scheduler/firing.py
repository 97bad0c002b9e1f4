"""Running one attempt of a firing, and telling the user about it.

A firing is an invocation like any other (seeds/000 "scheduler"): it goes
through the Invoker (signature checked again, sandbox, schemas) with caller
``{"kind": "scheduler", "schedule_id": ...}`` (and ``"actor"`` when a guest
created the schedule: it fires as that guest, at the guest's autonomy level
from ``[actors.guest]``), and its Invocation aggregate
comes back unsaved, to be committed with the firing's own events. A chain
runs its steps in order, piping with ``from_step`` / ``{{stepN.field}}``
as in a turn, and stops at the first failure. A callback is runtime code
looked up by key; an exception in it is a failed attempt, never a crashed
tick.

Every firing passes the same gate as a turn's step: the schedule's approval
must cover exactly the target and arguments about to run
(metnos/runtime/scheduler/approval.py), and each invocation is judged by the vaglio
with the approval standing in for the user's answer. A refusal runs nothing.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from domain.household import HOST
from metnos.mechanisms.sandbox.autonomy import DEFAULT as DEFAULT_LEVEL
from metnos.runtime import actors
from metnos.runtime.scheduler import approval as approvals
from metnos.runtime.scheduler import callbacks
from metnos.runtime.scheduler.callbacks import CallbackContext
from metnos.runtime.step.piping import PipingError, resolve_args
from metnos.runtime.step.policies import guard_policy
from metnos.runtime.step.vaglio import ALLOW, vaglio
from metnos.settings import in_force

# send_messages accepts bodies up to this size.
MAX_BODY = 4096


@dataclass
class Attempt:
    ok: bool
    kind: str
    output: Any = None
    error: dict[str, Any] | None = None
    invocations: list[Any] = field(default_factory=list)
    aggregates: list[Any] = field(default_factory=list)

    @property
    def invocation_ids(self) -> list[str]:
        return [str(i.id) for i in self.invocations]


def caller_of(schedule_id: str, actor: str = HOST) -> dict[str, str]:
    caller = {"kind": "scheduler", "schedule_id": schedule_id}
    # The host's firings keep the caller they always had; a guest's name the guest.
    return caller if actor == HOST else {**caller, "actor": actor}


class _Refused(Exception):
    def __init__(self, kind: str, message: str, verdict: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.error: dict[str, Any] = {"message": message, **({"verdict": verdict} if verdict else {})}


def _level_of(actor: str) -> str:
    """The autonomy a firing of ``actor``'s schedule runs and is judged at: a guest's from ``[actors.guest]``."""
    return DEFAULT_LEVEL if actor == HOST else actors.level_for(actor, DEFAULT_LEVEL, in_force().settings.actors)


def _judge(runtime: Any, name: str, args: dict[str, Any], intent: str, approved: bool, actor: str = HOST) -> None:
    """The vaglio on one call of a firing (guard and judge), as in a turn: as ``actor``, at its level, so a
    guest's read_only schedule is refused what has side effects before anything is invoked."""

    found = runtime.report.get(name)
    if found is None:
        return  # the invoker refuses an unknown executor with its own kind
    contract = found.manifest.contract
    verdict = vaglio(name, args, intent_text=intent, policy=guard_policy(runtime, os.environ),
                     side_effects=contract.side_effects, idempotent=contract.idempotent, user_approved=approved, principal=actor,
                     autonomy=_level_of(actor))
    if verdict.decision != ALLOW:
        kind = approvals.NOT_APPROVED if verdict.blocked_by is None else approvals.VAGLIO_DENIED
        raise _Refused(kind, f"the vaglio refuses {name}: {verdict.reason}", verdict.to_json())


def _invoke(runtime: Any, name: str, args: dict[str, Any], schedule_id: str, actor: str = HOST) -> tuple[Any, Any]:
    if actor == HOST:
        call = runtime.invoker.call(name, args, caller=caller_of(schedule_id))
    else:
        call = runtime.invoker.call(name, args, caller=caller_of(schedule_id, actor), autonomy=_level_of(actor))
    # A call-time signature failure quarantines the executor, as for any caller.
    runtime._record_quarantine(call)  # noqa: SLF001
    return call, call.invocation


def _kind_of(call: Any) -> str:
    if call.refusal is not None:
        return call.refusal.kind
    if not call.ok:
        return call.outcome.kind or "Failed"
    # The executor ran and answered, but its answer may be a reported error.
    obs = call.observation()
    if isinstance(obs, dict) and obs.get("ok") is False:
        error = obs.get("error") if isinstance(obs.get("error"), dict) else {}
        return str(error.get("class") or error.get("kind") or "Failed")
    return "ok"


def _ok(call: Any) -> bool:
    return _kind_of(call) == "ok"


def run_target(runtime: Any, schedule_id: str, target: dict[str, Any], args: dict[str, Any], now: datetime,
               *, approval: dict[str, Any] | None = None, intent: str = "", models: Any = None, actor: str = HOST) -> Attempt:
    """One attempt; ``approval`` is the schedule's (ScheduleApproved), checked
    against exactly ``target`` and ``args`` before anything runs."""
    kind = target["kind"]
    if kind != "callback":
        refused = approvals.refusal(runtime.report, approval, target, args)
        if refused is not None:
            return Attempt(False, approvals.NOT_APPROVED, error={"message": refused})
    approved = approval is not None
    if kind == "executor":
        try:
            _judge(runtime, target["name"], args, intent, approved, actor)
        except _Refused as r:
            return Attempt(False, r.kind, error=r.error)
        call, invocation = _invoke(runtime, target["name"], args, schedule_id, actor)
        obs = call.observation()
        ok = _ok(call)
        return Attempt(ok, _kind_of(call), obs, None if ok else obs.get("error"), [invocation] if invocation else [])
    if kind == "chain":
        return _run_chain(runtime, schedule_id, target["steps"], args, intent, approved, actor)
    fn = callbacks.resolve(target["key"])
    if fn is None:
        return Attempt(False, "UnknownCallback", error={"message": f"no builtin job registered under {target['key']!r}; known: {', '.join(callbacks.keys())}"})
    try:
        result = fn(CallbackContext(runtime, now, schedule_id, models), args)
    except Exception as e:  # noqa: BLE001 - a job's bug must not stop the loop
        tail = "".join(traceback.format_exception(e))[-2000:]
        return Attempt(False, "CallbackError", error={"message": f"{type(e).__name__}: {e}", "traceback": tail})
    return Attempt(result.ok, result.kind, result.output, result.error, aggregates=list(result.aggregates))


def _run_chain(runtime: Any, schedule_id: str, steps: list[dict[str, Any]], args: dict[str, Any], intent: str, approved: bool,
               actor: str = HOST) -> Attempt:

    observations: dict[int, Any] = {}
    invocations = []
    obs: Any = None
    for number, step in enumerate(steps, start=1):
        step_args = {**args, **step.get("args", {})} if number == 1 else step.get("args", {})
        try:
            resolved = resolve_args(step_args, observations, current_step=number).args
        except PipingError as e:
            return Attempt(False, "PipingError", obs, {"message": str(e), "step": number}, invocations)
        try:
            _judge(runtime, step["executor"], resolved, intent, approved, actor)
        except _Refused as r:
            return Attempt(False, r.kind, obs, {**r.error, "step": number}, invocations)
        call, invocation = _invoke(runtime, step["executor"], resolved, schedule_id, actor)
        if invocation is not None:
            invocations.append(invocation)
        obs = call.observation()
        observations[number] = obs
        if not _ok(call):
            return Attempt(False, _kind_of(call), obs, {**(obs.get("error") or {}), "step": number}, invocations)
    return Attempt(True, "ok", obs, None, invocations)


def is_idempotent(runtime: Any, target: dict[str, Any]) -> bool:
    """Whether running the target twice is harmless (callbacks are written to be)."""
    names = [target["name"]] if target["kind"] == "executor" else [s["executor"] for s in target.get("steps", [])]
    for name in names:
        found = runtime.report.get(name)
        if found is not None and not found.manifest.contract.idempotent:
            return False
    return True


def summary(output: Any) -> str:
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"]
    return orjson.dumps(output, option=orjson.OPT_SORT_KEYS).decode()


def clipped(body: str) -> str:
    return body if len(body) <= MAX_BODY else body[: MAX_BODY - 1] + "…"


def recipient(runtime: Any) -> str:
    """Who the scheduler's messages go to: ``[scheduler] deliver_to`` (default "me")."""
    return ((runtime.config or {}).get("scheduler") or {}).get("deliver_to", "me")


def send(runtime: Any, schedule_id: str, channel: str, body: str) -> tuple[dict[str, Any], Any]:
    """One message through send_messages; returns (notice for the log, its Invocation)."""
    body = clipped(body)
    call, invocation = _invoke(runtime, "send_messages", {"channel": channel, "messages": [{"to_user": recipient(runtime), "body": body}]}, schedule_id)
    notice = {"channel": channel, "ok": _ok(call), "kind": _kind_of(call), "invocation_id": str(invocation.id) if invocation else None}
    return notice, invocation
