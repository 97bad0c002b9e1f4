"""The vaglio and, where it asks, the user (seeds/002 ch. 9): the last word on a call before it runs."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from domain.turn import Turn
from metnos.runtime.turn.rules.base import BaseRule, Step, Verdict
from metnos.runtime.turn.rules.provenance import blanket, builtin_provenance, scheduled_untrusted_origins, untrusted_origins
from metnos.runtime.turn.shown import elapsed_ms
from metnos.runtime.step.vaglio import ALLOW, ASK, DENY, vaglio
from metnos.settings import i18n

_SEVERITY = {ALLOW: 0, ASK: 1, DENY: 2}


class Vaglio(BaseRule):
    """Guard (forbidden paths, core laws) and judge; the LLM judge where ``[runtime.judge]`` asks for it;
    the user for a call that asks. No autonomy level answers for the user (seeds/000: the asymmetry
    holds "even within Full")."""
    name = "vaglio"

    def on_resolved(self, step: Step) -> Verdict | None:
        if step.kind == "builtin":
            builtin = step.loop.catalogue.builtins[step.name]
            return _gate(step, side_effects=builtin.entry.side_effects, idempotent=builtin.entry.idempotent,
                         targets=builtin.targets(step.args))
        if step.kind == "scratchpad":
            return _gate(step, side_effects=False, idempotent=True)
        loop, te, args = step.loop, step.te, step.arguments
        started = time.perf_counter()
        untrusted = untrusted_origins(step)
        hint = None
        if loop.online.config.mnest_hint:
            ran = sorted({executor for executor, _ in step.state.executed.values()})
            hint = loop.ports.mnest_hint(step.name, ran, step.number) if ran else None
        verdict = vaglio(step.name, args, intent_text=step.request.text, policy=loop.policy, threshold=loop.settings.judge_threshold,
                         side_effects=te.entry.side_effects, idempotent=te.entry.idempotent, autonomy=step.request.autonomy,
                         untrusted=untrusted, mnest_hint=hint, principal=step.request.principal, approvable=step.request.approvals)
        step.record(Turn.StepJudged, step=step.number, verdict=verdict.to_json(), vaglio_ms=elapsed_ms(started))
        if verdict.decision != DENY and loop.judge.applies(step.name, te.loaded, side_effects=te.entry.side_effects):
            verdict = loop.judge.review(step.record, loop.ports.ask_llm, round=step.state.round, step=step.number,
                                        request_text=step.request.text, name=step.name, args=args, verdict=verdict, origins=untrusted)
        return _decided(step, verdict, args, untrusted=untrusted)


def _gate(step: Step, *, side_effects: bool, idempotent: bool, targets: list[tuple[str, dict[str, Any]]] | None = None) -> Verdict | None:
    """The vaglio for a call that is not an executor's (a builtin, the scratchpad). A builtin
    that sets up executor calls for later (a schedule) is judged with each of them, as a call
    that repeats: one with side effects asks."""
    loop, request, name = step.loop, step.request, step.name
    started = time.perf_counter()
    verdict = vaglio(name, step.args, intent_text=request.text, policy=loop.policy, threshold=loop.settings.judge_threshold,
                     side_effects=side_effects, idempotent=idempotent, autonomy=request.autonomy, principal=request.principal,
                     approvable=request.approvals)
    untrusted = scheduled_untrusted_origins(step, targets or [])
    for target, target_args in targets or ():
        te = loop.catalogue.get(target)
        if te is None:
            continue  # the builtin refuses an unknown executor itself
        judged = vaglio(target, target_args, intent_text=request.text, policy=loop.policy,
                        threshold=loop.settings.judge_threshold, side_effects=te.entry.side_effects,
                        idempotent=not te.entry.side_effects, autonomy=request.autonomy, principal=request.principal,
                        approvable=request.approvals,
                        untrusted=[why for why in untrusted if why.startswith(f"for {target}, ")])
        if _SEVERITY[judged.decision] > _SEVERITY[verdict.decision]:
            verdict = dataclasses.replace(judged, executor=name, reason=i18n.english("turn.vaglio.again_and_again", name=name, target=target, reason=judged.reason))
    traced = builtin_provenance(step) if step.kind == "builtin" else {}
    step.record(Turn.StepJudged, step=step.number, verdict=verdict.to_json(), vaglio_ms=elapsed_ms(started), provenance=traced or None)
    return _decided(step, verdict, step.args, untrusted=untrusted)


def _decided(step: Step, verdict: Any, args: dict[str, Any], *, untrusted: list[str] | None = None) -> Verdict | None:
    """A denial or the user's no is the step's observation; the user's yes is its approval. ``untrusted``: why
    targets came from content the user did not write; then only an answer to this question approves, not one
    given ahead (--yes)."""
    name = step.name
    if verdict.decision == DENY:
        return step.refuse({"ok": False, "error_class": "vaglio_denied", "error": verdict.reason}, args)
    if verdict.decision == ASK:
        step.record(Turn.ApprovalAsked, step=step.number, executor=name, reason=verdict.reason)
        # The user may take minutes: what the turn did so far is committed before they are asked.
        step.loop.commit_now(step.turn)
        with step.loop.interrupts.waiting_as(step.state, "while waiting for approval"):
            approved, by = step.loop.ports.approve(step.number, name, args, verdict.reason)
        step.record(Turn.ApprovalAnswered, step=step.number, approved=bool(approved), by=by)
        if approved and untrusted and blanket(by):
            return step.refuse({"ok": False, "error_class": "declined",
                                "error": i18n.english("turn.vaglio.approved_ahead", name=name, why="; ".join(untrusted), by=by)}, args)
        if not approved:
            return step.refuse({"ok": False, "error_class": "declined", "error": i18n.english("turn.vaglio.not_approved", name=name)}, args)
        step.approval = {"by": by, "turn_id": str(step.turn.id), "step": step.number}
    return None

