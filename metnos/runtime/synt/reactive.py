"""The reactive cascade's last step: a gap compose could not close becomes a generation proposal.

seeds/000 ch. 7: compose first (a chain of existing executors, offered in the
observation of the call to the missing one); when none closes the gap,
generate. After a turn, each call to an executor that does not exist and got
no chain opens a Proposal (``requested``, kind ``generate``) naming the
missing executor and the turn; the answer says so. Nothing is drafted or
installed until the user runs ``metnos synt approve ID`` and approves both
gates. A gap that already has an open proposal gets no second one.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

from domain.proposal import CLOSED, Proposal
from domain.turn import Turn
from metnos.runtime.synt.pipeline import run_id_of


def unclosed_gaps(runtime: Any, turn_id: str) -> list[str]:
    """The executors the turn called that do not exist and that no chain stood in for, in order."""
    names: list[str] = []
    for event in runtime.log.repository.event_store.get(UUID(turn_id)):
        if (isinstance(event, Turn.StepRejected) and event.kind == "unknown_executor"
                and "synt" not in event.observation):
            name = str(event.error.get("executor") or "")
            if name and name not in names:
                names.append(name)
    return names


def leave_proposals(runtime: Any, outcome: Any, request: str) -> Any:
    """Open a generation proposal for each unclosed gap of the turn; the outcome's message says so."""

    gaps = unclosed_gaps(runtime, outcome.turn_id)
    if not gaps:
        return outcome
    state = runtime.proposals.catch_up(runtime.log)
    waiting = {p["source"].get("wanted"): p for p in state["proposals"].values()
               if p["status"] not in CLOSED and p["source"].get("kind") == "turn"}
    notes, opened = [], []
    for name in gaps:
        found = waiting.get(name)
        if found is None:
            pid = runtime.ids()
            p = Proposal.open(id=pid, kind="generate", at=runtime.clock(), run_id=run_id_of(pid),
                              request=f"an executor like {name!r}, for the request: {request}",
                              source={"kind": "turn", "turn_id": outcome.turn_id, "wanted": name})
            opened.append(p)
            run_id = p.run_id
        else:
            run_id = found["run_id"]
        notes.append(f"No executor does {name!r} and no chain of existing ones stands in for it: synt proposal {run_id} "
                     f"waits to be generated (`metnos synt approve {run_id}`, or `metnos synt reject {run_id} --reason ...`).")
    if opened:
        runtime.log.save(*opened)
        runtime.proposals.catch_up(runtime.log)
    note = " ".join(notes)
    if outcome.answer is not None:
        return dataclasses.replace(outcome, answer=f"{outcome.answer}\n\n{note}")
    failure = dict(outcome.failure or {})
    said = failure.get("message", "").rstrip()
    failure["message"] = (said + ("" if not said or said.endswith((".", "!", "?")) else ".") + " " + note).strip()
    failure["synt_proposals"] = list(gaps)
    return dataclasses.replace(outcome, failure=failure)
