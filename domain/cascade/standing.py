"""Whether a plan may be proposed now: its anti-skill, the user's word for it, a contradiction pending.

Read by the consultation (metnos/runtime/cascade/consult.py) and by the plans
projection (projections/plans.py), which must agree on both.
"""

from __future__ import annotations

from typing import Any


def anti_skill(state: dict[str, Any], key: str, now: str) -> bool:
    until = state["anti"].get(key)
    return until is not None and until > now


def vouched(state: dict[str, Any], template: dict[str, Any], now: str) -> bool:
    """Whether the user approved a walk of the template, and that plan has not failed since."""
    entry_of_turn = state.get("entry_of_turn", {})
    for turn_id in template["sources"]:
        entry = state["entries"].get(entry_of_turn.get(turn_id, ""))
        if entry is not None and entry["state"] == "approved" and not anti_skill(state, entry["plan_id"], now):
            return True
    return False


def quotes_nothing(template: dict[str, Any]) -> bool:
    """An answer that points at none of the steps' outputs, after steps that did
    nothing the user approved: what the model worked out from what it read (a
    yes, "the file is empty", a summary), which other values would not bear out."""
    return not any("ref" in s for s in template["template"]["answer"]) and not template.get("acted", False)
