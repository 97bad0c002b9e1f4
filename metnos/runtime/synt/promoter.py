"""The promoter and its digest (seeds/002 ch. 11.2, ``promoter`` and ``promoter_digest``).

The promoter reads each proposal whose draft waits for the code approval
and records a verdict on it (``ProposalEvaluated``): ``promoted`` when none
of the six killers holds, ``held`` with the killers that do. Seven signals
go with it for the user to weigh. A draft is judged once; a new draft (a
new digest) is judged again. The verdict approves nothing: the code gate is
the user's, and the morning digest only puts the promoted drafts in front
of them, on the schedule's channel.

Killers: the draft's name is now taken; its last profile, static checks or
birth tests did not pass; there is no draft; an executor it builds on is no
longer in the catalogue. Signals: the kind, whether the repair round was
needed, the birth cases passed, whether it reaches the network, whether it
writes files, the uses its evidence counts, its age in days.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from domain.proposal import AWAITING_CODE, HELD, PROMOTED, Proposal
from metnos.runtime.jobs import CallbackContext, CallbackResult, digest
from metnos.runtime.synt.pipeline import draft_digest
from metnos.runtime.taken_names import taken_names

DIGEST_JOB = "promoter_digest"


def _last(stages: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    found = [s for s in stages if s["stage"] == name]
    return found[-1] if found else None


def _instant(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def killers(row: dict[str, Any], taken: set[str], loaded: set[str]) -> list[str]:
    stages = row["stages"]
    found = []
    if row["name"] in taken:
        found.append(f"name_taken: an executor named {row['name']} exists now")
    for stage, killer in (("profile", "profile_problems"), ("static checks", "static_problems"), ("birth tests", "birth_failed")):
        last = _last(stages, stage)
        if last is not None and not last["ok"]:
            found.append(f"{killer}: {'; '.join(last.get('problems') or [last.get('failure') or 'not passed'])}")
    if _last(stages, "draft") is None:
        found.append("draft_missing: no draft was written")
    gone = sorted(set(row["source"].get("executors") or []) - loaded)
    if gone:
        found.append(f"sources_gone: {', '.join(gone)} no longer in the catalogue")
    return found


def signals(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    stages = row["stages"]
    draft = _last(stages, "draft") or {}
    birth = _last(stages, "birth tests") or {}
    capabilities = (_last(stages, "profile") or {}).get("capabilities") or draft.get("capabilities") or {}
    evidence = row["source"].get("evidence") or {}
    return {
        "kind": row["kind"],
        "repaired": draft.get("round", 0) > 0,
        "birth_cases": sum(1 for c in birth.get("cases") or [] if c.get("ok")),
        "network": bool(capabilities.get("network")),
        "writes_files": bool(capabilities.get("fs:write")),
        "evidence_uses": int(evidence.get("uses") or 0),
        "age_days": (now - _instant(row["opened"])).days,
    }


def run_promoter(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    runtime = ctx.runtime
    state = runtime.proposals.catch_up(runtime.log)
    taken = taken_names(runtime.catalogue_state())
    loaded = {le.name for le in runtime.report.loaded}
    judged, changed = [], []
    for row in sorted(state["proposals"].values(), key=lambda r: r["opened"]):
        if row["status"] != AWAITING_CODE:
            continue
        proposal: Proposal = runtime.log.repository.get(UUID(row["id"]))
        current = draft_digest(proposal.spec or {}, proposal.files or {}, proposal.capabilities or {})
        if proposal.evaluation is not None and proposal.evaluation["draft_digest"] == current:
            continue
        found = killers(row, taken, loaded)
        verdict = HELD if found else PROMOTED
        proposal.evaluate(verdict=verdict, killers=found, signals=signals(row, ctx.now), draft_digest=current, at=ctx.now)
        changed.append(proposal)
        judged.append({"run_id": row["run_id"], "name": row["name"], "verdict": verdict, "killers": found})
    return CallbackResult(ok=True, output={"ok": True, "judged": judged}, aggregates=changed)


def run_promoter_digest(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    state = ctx.runtime.proposals.catch_up(ctx.runtime.log)
    waiting = []
    for row in sorted(state["proposals"].values(), key=lambda r: r["opened"]):
        evaluated = _last(row["stages"], "evaluated")
        if row["status"] == AWAITING_CODE and evaluated is not None and evaluated["verdict"] == PROMOTED:
            waiting.append({"run_id": row["run_id"], "name": row["name"], "kind": row["kind"]})
    text = ""
    if waiting:
        lines = [f"- {w['name']} ({w['kind']}): metnos synt show {w['run_id']}, then metnos synt approve {w['run_id']}" for w in waiting]
        text = f"{len(waiting)} new executor(s) passed their checks and wait for your approval:\n" + "\n".join(lines)
    return digest(ctx, DIGEST_JOB, {"waiting": waiting}, text)
