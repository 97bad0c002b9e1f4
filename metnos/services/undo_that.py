"""\"Undo that\" in a conversation: the turn before, put back by the undo service once the user approves (docs/turns.md, "Conversations").

"That" is the previous turn of the conversation the request continues, never the last turn of the log
(another chat's, a schedule's): with no turn before in the conversation (a new one, or one gone idle)
nothing is undone and the user is told how to name a turn. The question goes to the channel's approver
(Telegram's buttons, the dashboard's approvals, the terminal), as a step's approval does; the undo is
``metnos undo``'s own (replay/undo.py), recorded as ``TurnUndone`` on the turn it put back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from domain.errors import MetnosError
from metnos.runtime import actors
from metnos.runtime.turn.conversation import continued
from metnos.runtime.turn.ports import Approver
from metnos.runtime.turn.session import TurnOutcome
from metnos.services import remote_calls
from replay.undo import Undoer

# The whole request is the undo ("undo that", "revert it", "annullalo"): a request that says more is a turn.
_UNDO_THAT = re.compile(
    r"^\s*(?:please\s+)?(?:undo|revert)(?:\s+(?:that|it|this|the last one|what you (?:just )?did))?(?:,?\s+please)?\s*[.!]?\s*$"
    r"|^\s*annulla(?:lo|la)?(?:\s+(?:quello|questo|l'ultim[oa]))?(?:,?\s+per favore)?\s*[.!]?\s*$",
    re.IGNORECASE)
# What the approval names as the action.
UNDO = "undo"


def asks_to_undo(text: str) -> bool:
    return _UNDO_THAT.match(text) is not None


def _failed(turn_id: str, kind: str, message: str, status: str = "failed") -> TurnOutcome:
    return TurnOutcome(turn_id, status, failure={"kind": kind, "message": message})


def undo_that(runtime: Any, *, key: str, channel: str, approver: Approver, principal: str, idle_minutes: int) -> TurnOutcome:
    """Undo the previous turn of the conversation ``key``, if the user approves it."""
    earlier = continued(runtime, key, channel=channel, idle_minutes=idle_minutes, keep=1)["earlier"]
    if not earlier:
        return _failed("", "nothing_to_undo", "there is no turn before in this conversation to undo (a conversation ends after "
                       "[conversation] idle_minutes, or on request): name the turn with `metnos undo <turn id>` (see `metnos turns list`)")
    turn_id = earlier[-1]["turn"]
    undoer = Undoer(runtime, remote_undo=lambda trace_id, force: remote_calls.undo(runtime, trace_id, force=force))
    try:
        plan = undoer.plan(turn_id)
    except MetnosError as e:
        return _failed(turn_id, "undo_refused", str(e))
    preview = undoer.preview(plan)
    if preview.status == "already-undone":
        return _failed(turn_id, "undo_refused", f"the turn before (“{plan.text}”) is already undone")
    if preview.status == "would-refuse":
        return _failed(turn_id, "undo_refused", f"the turn before (“{plan.text}”) cannot be undone as it is: "
                       f"{len(plan.conflicts)} file(s) changed since, {len(plan.lost)} kept file(s) missing; "
                       f"see `metnos undo --dry-run {turn_id[:8]}`")
    if not plan.actions and not plan.remote:
        return _failed(turn_id, "nothing_to_undo", f"the turn before (“{plan.text}”) changed no file: there is nothing to undo")
    home = str(Path.home())
    paths = ["~" + a.path[len(home):] if a.path.startswith(home + "/") else a.path for a in plan.actions]
    paths += [f"{r.device}:{p}" for r in plan.remote for p in r.paths]
    reason = f"undo the turn before (“{plan.text}”): put back {', '.join(paths)}"
    approved, by = actors.approver_for(principal, approver)(0, UNDO, {"turn": turn_id, "paths": paths}, reason)
    if not approved:
        return _failed(turn_id, "undo_declined", f"not undone: the undo of “{plan.text}” was declined ({by})", status="refused")
    result = undoer.apply(plan)
    if result.status != "undone":
        return _failed(turn_id, "undo_refused", f"not undone ({result.status}): see `metnos undo --dry-run {turn_id[:8]}`")
    return TurnOutcome(turn_id, "answered", answer=f"Undone: “{plan.text}”. Put back: {', '.join(paths)}.")
