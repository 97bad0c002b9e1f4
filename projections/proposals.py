"""Synt's proposals and the suggestions that lead to them, folded from the log.

``metnos synt list`` and ``synt show`` read this view: each proposal with its
status and every stage it went through, in order; each recurring wish the
maintenance suggested (``SynthesisSuggested``) with its latest outcome.
Nothing here is a source of truth: deleting the view and folding again gives
the same state.
"""

from __future__ import annotations

from typing import Any

from domain.proposal import (
    APPROVED,
    AWAITING_CODE,
    AWAITING_SPEC,
    DRAFTING,
    FAILED,
    INSTALLED,
    REJECTED,
    Proposal,
)
from domain.synthesis import Synthesis
from metnos.mechanisms.store.event_record import Record
from projections.base import Fold, Handler

# Event class -> (stage name shown to the user, the status it leaves, the fields kept).
_STAGES: dict[type, tuple[str, str | None, tuple[str, ...]]] = {
    Proposal.SpecificationDrafted: ("specification", AWAITING_SPEC, ("spec", "tier", "model")),
    Proposal.SpecificationApproved: ("specification approved", DRAFTING, ("by",)),
    Proposal.DraftWritten: ("draft", None, ("round", "files", "capabilities", "tier", "model")),
    Proposal.ProfileDerived: ("profile", None, ("round", "ok", "capabilities", "profile", "problems")),
    Proposal.StaticChecked: ("static checks", None, ("round", "ok", "problems")),
    Proposal.BirthTested: ("birth tests", None, ("round", "ok", "cases", "failure")),
    Proposal.CodeApproved: ("code approved", APPROVED, ("by", "draft_digest")),
    Proposal.ExecutorInstalled: ("installed", INSTALLED, ("name", "version", "digest", "path")),
    Proposal.ProposalEvaluated: ("evaluated", None, ("verdict", "killers", "signals", "draft_digest")),
    Proposal.ProposalRejected: ("rejected", REJECTED, ("stage", "reason", "by")),
    Proposal.ProposalFailed: ("failed", FAILED, ("stage", "reason")),
}


class ProposalsFold(Fold):
    name = "proposals"
    # ProposalEvaluated is new: no stored view has passed one by, so the version stays.
    version = 1

    def initial(self) -> dict[str, Any]:
        return {"proposals": {}, "suggestions": {}}

    def handlers(self) -> dict[type, Handler]:
        table: dict[type, Handler] = {
            Proposal.ProposalOpened: _opened,
            Synthesis.SynthesisOpened: _suggestion_opened,
            Synthesis.SynthesisSuggested: _suggested,
        }
        for cls, (stage, status, fields) in _STAGES.items():
            table[cls] = _stage(stage, status, fields)
        return table


def _opened(state: dict[str, Any], record: Record, position: int) -> None:
    pid = record["originator_id"]
    state["proposals"][pid] = {
        "id": pid, "run_id": record["run_id"], "kind": record["kind"], "request": record["request"],
        "source": record["source"], "status": "requested", "opened": record["timestamp"],
        "since": record["timestamp"], "name": None, "stages": [],
    }


def _stage(stage: str, status: str | None, fields: tuple[str, ...]) -> Handler:
    def fold(state: dict[str, Any], record: Record, position: int) -> None:
        p = state["proposals"].get(record["originator_id"])
        if p is None:
            return
        # The stage a rejection or failure happened at is kept as ``at_stage``.
        entry = {"stage": stage, "at": record["timestamp"], **{("at_stage" if f == "stage" else f): record[f] for f in fields}}
        p["stages"].append(entry)
        if stage == "specification":
            p["name"] = record["spec"].get("name")
        if stage == "birth tests" and record["ok"]:
            p["status"] = AWAITING_CODE
        elif status is not None:
            p["status"] = status
        p["since"] = record["timestamp"]

    return fold


def _suggestion_opened(state: dict[str, Any], record: Record, position: int) -> None:
    sid = record["originator_id"]
    state["suggestions"][sid] = {"id": sid, "wanted": record["wanted"], "opened": record["timestamp"], "last": None}


def _suggested(state: dict[str, Any], record: Record, position: int) -> None:
    s = state["suggestions"].get(record["originator_id"])
    if s is not None:
        s["last"] = {k: record[k] for k in ("source", "uses", "weight", "outcome", "chain")} | {"at": record["timestamp"]}


def find(state: dict[str, Any], key: str, table: str = "proposals") -> dict[str, Any] | None:
    """The proposal (or suggestion) whose id or run id is ``key``, or starts with it; None when none or several do."""
    rows = state[table].values()
    exact = [r for r in rows if key in (r["id"], r.get("run_id"))]
    if exact:
        return exact[0]
    found = [r for r in rows if r["id"].startswith(key) or (r.get("run_id") or "").startswith(key)]
    return found[0] if len(found) == 1 else None
