"""Undo a turn from the log: put its files back, say what cannot be put back (DESIGN decision 6).

The plan is read from history alone: the turn's invocations, in reverse step
order, each with the before-image and after-state of the paths it could
change. A path is checked against the disk only where no later step of the
turn touched it (or a folder around it, or a file inside it): there the file
must still be as the turn left it, otherwise it is a conflict and nothing is
done unless forced. A path already back as it was before counts as done, so
an undo cut short can simply be run again. Invocations that acted outside
the files (a message sent) are listed, not hidden. Once done, ``TurnUndone``
records what was restored; a turn undone once is never undone again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from domain.invocation import Invocation
from domain.turn import OPEN, Turn, status_of
from metnos.blobs import BlobStore
from metnos.errors import MetnosError
from metnos.filestate import describe, digests, put_back, take


class NothingToUndo(MetnosError):
    """No turn left that has not been undone."""


class TurnStillRunning(MetnosError):
    """The turn has not ended: its writer is at work."""


class UndoTurnUnknown(MetnosError):
    """No such turn in the log."""


@dataclass
class Action:
    step: int
    executor: str
    path: str
    before: dict[str, Any]
    after: dict[str, Any] | None  # None: the turn's result was too large to check
    created_from: str | None = None
    checked: bool = True

    @property
    def verb(self) -> str:
        if self.before["type"] == "missing":
            return "remove"
        if self.after is None or self.after["type"] == "missing":
            return "bring back"
        return "restore"

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step, "executor": self.executor, "path": self.path, "action": self.verb,
            "to": describe(self.before), "from": describe(self.after) if self.after else "unknown",
        }


@dataclass
class Conflict:
    step: int
    executor: str
    path: str
    left: str
    now: str

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "executor": self.executor, "path": self.path, "turn_left": self.left, "now": self.now}


@dataclass
class UndoPlan:
    turn_id: str
    text: str
    already_undone: bool
    actions: list[Action] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    not_undoable: list[dict[str, Any]] = field(default_factory=list)
    # Paths already back as they were (an earlier undo cut short): nothing to do there.
    settled: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id, "text": self.text, "already_undone": self.already_undone,
            "actions": [a.to_json() for a in self.actions], "conflicts": [c.to_json() for c in self.conflicts],
            "not_undoable": self.not_undoable,
        }


@dataclass
class UndoResult:
    plan: UndoPlan
    status: str  # undone | already-undone | refused
    restored: list[dict[str, Any]] = field(default_factory=list)
    forced: bool = False

    def to_json(self) -> dict[str, Any]:
        return {**self.plan.to_json(), "status": self.status, "restored": self.restored, "forced": self.forced}


def _related(a: str, b: str) -> bool:
    pa, pb = Path(a), Path(b)
    return pa == pb or pa in pb.parents or pb in pa.parents


class Undoer:
    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.log = runtime.log
        self.blobs = BlobStore(runtime.workspace.blobs_dir)

    def last_turn(self) -> str:
        state = self.runtime.turns.catch_up(self.log)
        for key in reversed(state["order"]):
            if not state["turns"][key]["undone"]:
                return key
        msg = "there is no turn left to undo"
        raise NothingToUndo(msg)

    def _turn_events(self, turn_id: str) -> list[Any]:
        try:
            events = list(self.log.events.get(UUID(turn_id)))
        except ValueError:
            events = []
        if not events or not isinstance(events[0], Turn.TurnStarted):
            msg = f"there is no turn {turn_id} in the log (see `metnos turns list`)"
            raise UndoTurnUnknown(msg)
        return events

    def plan(self, turn_id: str | None = None) -> UndoPlan:
        turn_id = turn_id or self.last_turn()
        events = self._turn_events(turn_id)
        if status_of(events) == OPEN:
            # Every boot closes the turns whose writer is gone: one still open is being written.
            msg = f"turn {turn_id} is still running; undo it once it has ended (or stop it: Ctrl-C)"
            raise TurnStillRunning(msg)
        plan = UndoPlan(turn_id, events[0].text, any(isinstance(e, Turn.TurnUndone) for e in events))
        if plan.already_undone:
            return plan
        steps = [e for e in events if isinstance(e, Turn.StepInvoked) and e.invocation_id]
        per_step: list[list[Action]] = []
        for invoked in steps:
            per_step.append(self._step_actions(invoked, plan))
        touched_later: list[str] = []
        for actions in reversed(per_step):
            for action in reversed(actions):
                action.checked = not any(_related(action.path, p) for p in touched_later)
                plan.actions.append(action)
            touched_later.extend(a.path for a in actions)
        for action in plan.actions:
            if action.checked:
                self._check(action, plan)
        plan.actions = [a for a in plan.actions if a.path not in plan.settled or not a.checked]
        return plan

    def _step_actions(self, invoked: Any, plan: UndoPlan) -> list[Action]:
        recorded = list(self.log.events.get(UUID(invoked.invocation_id)))
        if any(isinstance(e, Invocation.InvocationRefused) for e in recorded):
            return []  # it never ran
        captured = next((e for e in recorded if isinstance(e, Invocation.FilesCaptured)), None)
        settled = next((e for e in recorded if isinstance(e, Invocation.FilesSettled)), None)
        where = {"step": invoked.step, "executor": invoked.executor}
        if captured is None:
            loaded = self.runtime.report.get(invoked.executor, invoked.version) or self.runtime.report.get(invoked.executor)
            if loaded is None:
                plan.not_undoable.append({**where, "reason": f"{invoked.executor} is no longer installed; what it did cannot be told"})
            elif loaded.manifest.contract.side_effects:
                plan.not_undoable.append({**where, "reason": "its effects are not files Metnos keeps before-images of (a message sent stays sent)"})
            return []
        after = {r["path"]: r for r in (settled.after if settled else [])}
        actions = []
        for record in captured.before:
            if "refused" in record:
                plan.not_undoable.append({**where, "path": record["path"], "reason": f"no before-image was kept: {record['refused']}"})
                continue
            left = after.get(record["path"], {})
            action = Action(
                invoked.step, invoked.executor, record["path"], record["node"], left.get("node"),
                created_from=record.get("created_from"),
            )
            if action.after == action.before:
                continue  # this step did not change it
            lost = [d for d in digests(action.before) if d not in self.blobs]
            if lost:
                plan.not_undoable.append({**where, "path": action.path, "reason": f"{len(lost)} kept file(s) are gone from the blob store"})
                continue
            actions.append(action)
        return actions

    def _check(self, action: Action, plan: UndoPlan) -> None:
        try:
            now = take(Path(action.path))
        except Exception as e:  # noqa: BLE001 - whatever stops reading it is a conflict to show
            plan.conflicts.append(Conflict(action.step, action.executor, action.path, describe(action.after or {}), f"unreadable: {e}"))
            return
        if now == action.after:
            return
        if now == action.before:
            plan.settled.append(action.path)
            return
        left = describe(action.after) if action.after is not None else "more than Metnos checks"
        plan.conflicts.append(Conflict(action.step, action.executor, action.path, left, describe(now)))

    def apply(self, plan: UndoPlan, *, force: bool = False) -> UndoResult:
        if plan.already_undone:
            return UndoResult(plan, "already-undone")
        if plan.conflicts and not force:
            return UndoResult(plan, "refused")
        conflicting = {c.path for c in plan.conflicts}
        restored = []
        for action in plan.actions:
            entry = action.to_json()
            if action.path in conflicting:
                # What --force overwrites is kept too, so the later edit is not lost for good.
                try:
                    entry["displaced"] = take(Path(action.path), blobs=self.blobs)
                except Exception:  # noqa: BLE001 - keeping it is a courtesy, the undo goes on
                    entry["displaced"] = None
            put_back(Path(action.path), action.before, self.blobs,
                     created_from=Path(action.created_from) if action.created_from else None)
            restored.append(entry)
        turn = self.log.repository.get(UUID(plan.turn_id))
        forced = bool(force and plan.conflicts)
        turn.record(Turn.TurnUndone, at=self.runtime.clock(), restored=restored, not_undoable=plan.not_undoable, forced=forced)
        self.log.save(turn)
        self.runtime.turns.catch_up(self.log)
        return UndoResult(plan, "undone", restored, forced)
