"""Applying accepted introspection proposals (seeds/002 ch. 11.2, ``introvertiva_apply``).

A merge, generalisation or specialisation the introspective cascade
proposed runs the same seven stages as any generation, with the user at both
gates. Once the user has accepted one (approved its specification, or its
code), the stages that follow need no one: this job runs them at night,
through the model for the draft and in the sandbox for the birth tests, and
stops at the next gate. No gate is ever answered here.
"""

from __future__ import annotations

from typing import Any

from domain.proposal import APPROVED, DRAFTING
from metnos.runtime.jobs import CallbackContext, CallbackResult
from metnos.runtime.synt.pipeline import Synt

INTROSPECTION = "introspection"
TIER = "wise"


def _no_answer(gate: str, view: dict[str, Any]) -> tuple[None, str]:
    return None, ""


def accepted(state: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((r for r in state["proposals"].values()
                   if r["source"].get("kind") == INTROSPECTION and r["status"] in (DRAFTING, APPROVED)),
                  key=lambda r: r["opened"])


def run_introspection_apply(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    runtime = ctx.runtime
    rows = accepted(runtime.proposals.catch_up(runtime.log))
    if rows and ctx.models is None and any(r["status"] == DRAFTING for r in rows):
        return CallbackResult(ok=False, kind="NoModel", error={
            "message": "accepted proposals wait for their draft and the scheduler has no model; "
                       "run the daemon without --no-model, or `metnos synt approve ID` by hand"})
    tier = str(args.get("tier", TIER))
    synt = Synt(runtime, provider=_Lazy(ctx.models, tier) if ctx.models else None, tier=tier)
    applied = []
    for row in rows:
        proposal = synt.advance(synt.get(row["id"]), _no_answer)
        applied.append({"run_id": row["run_id"], "kind": row["kind"], "status": proposal.status})
    return CallbackResult(ok=True, output={"ok": True, "applied": applied})


class _Lazy:
    """The tier's provider, asked for only when a stage needs the model."""

    def __init__(self, models: Any, tier: str) -> None:
        self._models, self._tier, self._provider = models, tier, None

    def _get(self) -> Any:
        if self._provider is None:
            self._provider = self._models(self._tier)
        return self._provider

    @property
    def model(self) -> str:
        return self._get().model

    def complete(self, messages: Any, **kw: Any) -> Any:
        return self._get().complete(messages, **kw)
