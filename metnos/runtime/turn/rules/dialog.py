"""The planner's dialog tools run here, after the vaglio: the question goes to the user, the answer is the observation."""

from __future__ import annotations

from metnos.runtime.step.dialog_tools import DIALOG_TOOLS
from metnos.runtime.turn.dialog import run_dialog_tool
from metnos.runtime.turn.rules.base import BaseRule, Step, Verdict


class Dialog(BaseRule):
    """get_inputs and request_location_from_user (metnos/runtime/turn/dialog.py): asked of the user, not of a service."""
    name = "dialog"

    def on_resolved(self, step: Step) -> Verdict | None:
        if step.kind != "builtin" or step.name not in DIALOG_TOOLS:
            return None
        return run_dialog_tool(step)
