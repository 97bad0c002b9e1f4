"""The proposals' clean-up (seeds/002 ch. 11.2, ``proposals_cleanup``): close, never delete.

A proposal still waiting for the user (requested, at the specification or
at the code gate) that nobody touched for ``max_age_days`` days (30 by
default) is rejected by ``proposals_cleanup`` with the reason; an open
proposal asking for the same thing (same kind, same request, spaces and
case aside) as an older open one is rejected as its duplicate. Both are
``ProposalRejected`` events: ``metnos synt show`` keeps every stage of
them, and a wanted one is proposed again from its suggestion or request.
Proposals the user has already approved a gate of and that are being
worked on (drafting, approved) are left alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from domain.proposal import AWAITING_CODE, AWAITING_SPEC, REQUESTED
from metnos.runtime.jobs import CallbackContext, CallbackResult

BY = "proposals_cleanup"
MAX_AGE_DAYS = 30
_WAITING = (REQUESTED, AWAITING_SPEC, AWAITING_CODE)


def _instant(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def last_touched(row: dict[str, Any]) -> datetime:
    """When the proposal last moved; the promoter's verdict is no move."""
    moved = [s["at"] for s in row["stages"] if s["stage"] != "evaluated"]
    return _instant(moved[-1] if moved else row["opened"])


def run_proposals_cleanup(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    max_age = args.get("max_age_days", MAX_AGE_DAYS)
    if isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 1:
        return CallbackResult(ok=False, kind="BadArguments", error={"message": f"max_age_days must be a positive integer, got {max_age!r}"})
    runtime = ctx.runtime
    state = runtime.proposals.catch_up(runtime.log)
    cutoff = ctx.now - timedelta(days=max_age)
    first_of: dict[tuple[str, str], str] = {}
    closed, changed = [], []
    for row in sorted(state["proposals"].values(), key=lambda r: (_instant(r["opened"]), r["id"])):
        if row["status"] not in _WAITING:
            continue
        same = (row["kind"], " ".join(row["request"].lower().split()))
        if same in first_of:
            reason = f"a duplicate of the older proposal {first_of[same]}, which asks the same"
        elif last_touched(row) < cutoff:
            reason = f"no answer in {max_age} days; closed by the nightly clean-up, kept in `metnos synt show`"
        else:
            first_of[same] = row["run_id"]
            continue
        proposal = runtime.log.repository.get(UUID(row["id"]))
        proposal.reject(reason=reason, by=BY, at=ctx.now)
        changed.append(proposal)
        closed.append({"run_id": row["run_id"], "reason": reason})
    return CallbackResult(ok=True, output={"ok": True, "closed": closed}, aggregates=changed)
