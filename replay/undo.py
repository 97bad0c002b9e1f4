"""Undo a turn from the log: put its files back, say what cannot be put back (DESIGN decision 6).

The plan is read from history alone: the turn's invocations, in reverse step
order, each with the before-image and after-state of the paths it could
change. A path is checked against the disk only where no later step of the
turn touched it (or a folder around it, or a file inside it): there the file
must still be as the turn left it, otherwise it is a conflict and nothing is
done unless forced. Invocations that acted outside the files (a message
sent) are listed, not hidden.

Nothing is touched until every kept file the plan needs is in the blob store
and matches its digest; a plan that would lose a file is refused. The undo
is a journal (domain/undo.py): the plan is recorded before the first path
changes, each path after it is back, and the end together with the turn's
``TurnUndone``. Killed in between, the next ``undo`` reads the journal and
resumes where it stopped: the paths already back are its own work, and the
one it was at when killed may be in any state (what stands there is kept in
the blob store before it is replaced). Files wait in the workspace's staging
folder, never in the user's folders. A turn undone once is never undone again.

A step that ran on a paired device (its invocation's trace id is a
``RemoteCall`` in the log) keeps its before-images on the device: the plan
lists it as a remote action, and ``apply`` asks the device to put its paths
back (``remote_undo``, wired by the services) before any file here is touched;
a device that cannot be reached, or that finds its files changed since,
refuses the whole undo and nothing is changed. The device's answer is a
``RemoteCall.CallUndone`` in the log, so a resumed undo does not ask twice.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.utils import get_topic

from domain.device import RemoteCall
from domain.invocation import Invocation
from domain.turn import OPEN, Turn, status_of
from domain.undo import UndoJournal, journal_id
from metnos.mechanisms.blobs import BlobError, BlobStore
from domain.errors import MetnosError
from metnos.mechanisms.filestate import describe, describe_modes, digests, leftover_of, only_mode_differs, put_back, same, take


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
    # The folder holding the path and its time before the step ({"path", "mtime"}); None in logs from before it was kept.
    parent: dict[str, Any] | None = None

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

    def to_record(self) -> dict[str, Any]:
        return {
            "step": self.step, "executor": self.executor, "path": self.path, "before": self.before,
            "after": self.after, "created_from": self.created_from, "checked": self.checked, "parent": self.parent,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Action:
        return cls(**record)


@dataclass
class RemoteAction:
    """A step that ran on a device: its paths go back through the device, which kept their before-images."""

    step: int
    executor: str
    device: str
    trace_id: str
    paths: list[str]
    restored: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "executor": self.executor, "device": self.device, "trace_id": self.trace_id,
                "paths": self.paths, "action": "put back on the device"}


# A remote call refused with these may still have run on the device: its undo is asked for too.
_MAY_HAVE_RUN = ("timeout", "device-error")


@dataclass
class Conflict:
    step: int
    executor: str
    path: str
    left: str
    now: str
    # Bytes, targets and entries as the turn left them: only a mode changed since.
    only_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "executor": self.executor, "path": self.path, "turn_left": self.left, "now": self.now,
                "only_mode": self.only_mode}


@dataclass
class UndoPlan:
    turn_id: str
    text: str
    already_undone: bool
    actions: list[Action] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    not_undoable: list[dict[str, Any]] = field(default_factory=list)
    # Paths already back as they were: nothing to do there.
    settled: list[str] = field(default_factory=list)
    # Kept files the plan needs that are gone from the blob store or damaged: the undo is refused.
    lost: list[dict[str, Any]] = field(default_factory=list)
    # An undo of this turn that was cut short: the plan is its plan, resumed.
    journal: UndoJournal | None = None
    # Steps that ran on a device, put back through it.
    remote: list[RemoteAction] = field(default_factory=list)

    @property
    def resuming(self) -> bool:
        return self.journal is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id, "text": self.text, "already_undone": self.already_undone,
            "actions": [a.to_json() for a in self.actions], "conflicts": [c.to_json() for c in self.conflicts],
            "not_undoable": self.not_undoable, "lost": self.lost, "resuming": self.resuming,
            "already_back": sorted(self.journal.restored) if self.journal else [],
            "remote": [r.to_json() for r in self.remote],
        }


@dataclass
class UndoResult:
    plan: UndoPlan
    # undone | already-undone | refused (conflicts) | refused-lost (kept files missing) | refused-remote (a device said no)
    status: str
    restored: list[dict[str, Any]] = field(default_factory=list)
    forced: bool = False
    # Why a device refused its part: {"step", "executor", "device", "kind", "message"}.
    remote_refusal: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.plan.to_json(), "status": self.status, "restored": self.restored, "forced": self.forced,
                "remote_refusal": self.remote_refusal}


def _related(a: str, b: str) -> bool:
    pa, pb = Path(a), Path(b)
    return pa == pb or pa in pb.parents or pb in pa.parents


class Undoer:
    def __init__(self, runtime: Any, *, remote_undo: Callable[[str, bool], dict[str, Any]] | None = None) -> None:
        """``remote_undo(trace_id, force)`` asks a device to put back one call's paths (its answer:
        ``{"restored": [...], "not_restored": [...]}``), raising a MetnosError when it cannot."""
        self.runtime = runtime
        self.log = runtime.log
        self.blobs = BlobStore(runtime.workspace.blobs_dir)
        self.remote_undo = remote_undo
        self._remote_calls: dict[str, dict[str, Any]] | None = None

    def last_turn(self) -> str:
        # An undo cut short comes first: until it is finished, the user's files are half one, half the other.
        unfinished = self.unfinished_undo()
        if unfinished is not None:
            return unfinished
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
        journal = self._journal(turn_id)
        if journal is not None:
            self._resume_plan(plan, journal)
        else:
            self._fresh_plan(plan, events)
        self._remote_plan(plan, events)
        self._check_blobs(plan)
        return plan

    def _remote_facts(self) -> dict[str, dict[str, Any]]:
        """The log's remote calls by trace id: what was planned, answered, refused, undone."""
        if self._remote_calls is None:
            topics = tuple(get_topic(e) for e in (RemoteCall.CallPlanned, RemoteCall.CallAnswered, RemoteCall.CallRefused,
                                                  RemoteCall.CallUndone))
            facts: dict[str, dict[str, Any]] = {}
            for _, event in self.log.domain_events(1, topics=topics):
                facts.setdefault(event.trace_id, {})[type(event).__name__] = event
            self._remote_calls = facts
        return self._remote_calls

    def _remote_trace(self, invocation_id: str) -> str | None:
        recorded = list(self.log.events.get(UUID(invocation_id)))
        trace_id = recorded[0].trace_id if recorded else None
        return trace_id if trace_id in self._remote_facts() else None

    def _remote_plan(self, plan: UndoPlan, events: list[Any]) -> None:
        """The steps that ran on a device and are not yet put back there, last step first."""
        for invoked in reversed([e for e in events if isinstance(e, Turn.StepInvoked) and e.invocation_id]):
            trace_id = self._remote_trace(invoked.invocation_id)
            if trace_id is None:
                continue
            facts = self._remote_facts()[trace_id]
            refused = facts.get("CallRefused")
            if "CallUndone" in facts or (refused is not None and refused.kind not in _MAY_HAVE_RUN):
                continue  # put back already, or it never ran there
            answered = facts.get("CallAnswered")
            outcome = answered.outcome if answered is not None else {}
            before = {r["path"]: r.get("node") for r in outcome.get("before", [])}
            after = outcome.get("after", [])
            changed = [r["path"] for r in after if r["path"] not in before or not same(before[r["path"]], r.get("node"))]
            if answered is not None and not changed:
                continue  # it changed nothing there
            plan.remote.append(RemoteAction(invoked.step, invoked.executor, facts["CallPlanned"].device, trace_id,
                                            changed or [r["path"] for r in after]))

    def unfinished_undo(self) -> str | None:
        """The turn of the latest undo that was started and never finished, if any."""
        topic = get_topic(UndoJournal.UndoStarted)
        started = [event.turn_id for _, event in self.log.domain_events(topics=(topic,))]
        return next((turn_id for turn_id in reversed(started) if self._journal(turn_id) is not None), None)

    def _journal(self, turn_id: str) -> UndoJournal | None:
        try:
            journal = self.log.repository.get(journal_id(turn_id))
        except AggregateNotFoundError:
            return None  # no undo of this turn was ever started
        return None if journal.finished else journal

    def _resume_plan(self, plan: UndoPlan, journal: UndoJournal) -> None:
        plan.journal = journal
        plan.not_undoable = list(journal.not_undoable)
        plan.actions = [Action.from_record(r) for r in journal.actions]
        at = journal.in_progress
        for index, action in enumerate(plan.actions):
            # Paths already back are this undo's own work; the one it was at
            # when it stopped may be half done, so it is not a conflict either.
            if index in journal.restored or index == at or not action.checked:
                continue
            self._check(action, plan)

    def _fresh_plan(self, plan: UndoPlan, events: list[Any]) -> None:
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

    def _check_blobs(self, plan: UndoPlan) -> None:
        """Every kept file the plan still needs, read back and checked against its digest."""
        done = set(plan.journal.restored) if plan.journal else set()
        checked: dict[str, str | None] = {}
        for index, action in enumerate(plan.actions):
            if index in done:
                continue
            for digest in digests(action.before):
                if digest not in checked:
                    try:
                        self.blobs.get(digest)
                        checked[digest] = None
                    except BlobError as e:
                        checked[digest] = str(e)
                if checked[digest] is not None:
                    plan.lost.append({"step": action.step, "executor": action.executor, "path": action.path,
                                      "digest": digest, "problem": checked[digest]})

    def _step_actions(self, invoked: Any, plan: UndoPlan) -> list[Action]:
        if self._remote_trace(invoked.invocation_id) is not None:
            return []  # its files are on the device: a remote action (_remote_plan)
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
                created_from=record.get("created_from"), parent=record.get("parent"),
            )
            if same(action.after, action.before):
                continue  # this step did not change it
            actions.append(action)
        return actions

    def _check(self, action: Action, plan: UndoPlan) -> None:
        try:
            now = take(Path(action.path))
        except Exception as e:  # noqa: BLE001 - whatever stops reading it is a conflict to show
            plan.conflicts.append(Conflict(action.step, action.executor, action.path, describe(action.after or {}), f"unreadable: {e}"))
            return
        if same(now, action.after):
            return
        if same(now, action.before):
            plan.settled.append(action.path)
            return
        if only_mode_differs(now, action.after):
            whose = "its mode" if now.get("mode") != action.after.get("mode") else "the mode of something inside it"  # type: ignore[union-attr]
            plan.conflicts.append(Conflict(action.step, action.executor, action.path, describe_modes(action.after),  # type: ignore[arg-type]
                                           f"{describe_modes(now)}: only {whose} changed", only_mode=True))
            return
        left = describe(action.after) if action.after is not None else "more than Metnos checks"
        plan.conflicts.append(Conflict(action.step, action.executor, action.path, left, describe(now)))

    @staticmethod
    def preview(plan: UndoPlan, *, force: bool = False) -> UndoResult:
        """What :meth:`apply` would do with ``plan``, changing nothing (``undo --dry-run``, the dashboard)."""
        refuse = plan.lost or (plan.conflicts and not force)
        status = "already-undone" if plan.already_undone else ("would-refuse" if refuse else "dry-run")
        return UndoResult(plan, status)

    def apply(self, plan: UndoPlan, *, force: bool = False) -> UndoResult:
        if plan.already_undone:
            return UndoResult(plan, "already-undone")
        if plan.lost:
            return UndoResult(plan, "refused-lost")
        if plan.conflicts and not force:
            return UndoResult(plan, "refused")
        # The devices first: one that cannot put its part back leaves everything here as it is.
        for remote in plan.remote:
            refusal = self._undo_remote(remote, force)
            if refusal is not None:
                return UndoResult(plan, "refused-remote", remote_refusal=refusal)
        staging = self.runtime.workspace.runtime_dir / "undo" / plan.turn_id
        journal = plan.journal
        if journal is None:
            forced = bool(force and plan.conflicts)
            journal = UndoJournal.start(
                turn_id=plan.turn_id, at=self.runtime.clock(), actions=[a.to_record() for a in plan.actions],
                not_undoable=plan.not_undoable, forced=forced,
            )
            self.log.save(journal)
        self._clear_leftovers(plan, staging)
        conflicting = {c.path for c in plan.conflicts}
        cut_at = journal.in_progress if plan.journal is not None else None
        for index, action in enumerate(plan.actions):
            if index in journal.restored:
                continue
            displaced = None
            if action.path in conflicting or index == cut_at:
                displaced = self._keep_displaced(action)
            put_back(Path(action.path), action.before, self.blobs, staging=staging,
                     created_from=Path(action.created_from) if action.created_from else None)
            journal.path_restored(index=index, path=action.path, displaced=displaced, at=self.runtime.clock())
            self.log.save(journal)
        shutil.rmtree(staging, ignore_errors=True)
        _put_folder_times_back(plan.actions)
        restored = self._restored(plan, journal) + [
            {"step": r.step, "executor": r.executor, "device": r.device, "path": path, "action": "restore on the device"}
            for r in plan.remote for path in r.restored]
        forced = journal.forced or bool(force and plan.conflicts)
        turn = self.log.repository.get(UUID(plan.turn_id))
        turn.record(Turn.TurnUndone, at=self.runtime.clock(), restored=restored, not_undoable=plan.not_undoable, forced=forced)
        journal.finish(at=self.runtime.clock())
        self.log.save(journal, turn)
        self.runtime.turns.catch_up(self.log)
        # A turn that followed a cascade template, undone, contradicts it.
        from metnos.runtime.cascade.contradiction import record_drops

        record_drops(self.runtime)
        return UndoResult(plan, "undone", restored, forced)

    def _undo_remote(self, remote: RemoteAction, force: bool) -> dict[str, Any] | None:
        """Ask the device to put the step's paths back; None when it did, else why not."""
        where = {"step": remote.step, "executor": remote.executor, "device": remote.device}
        if self.remote_undo is None:
            return {**where, "kind": "remote-unwired",
                    "message": f"step {remote.step} ran on {remote.device}, and this process cannot call devices: run `metnos undo`"}
        try:
            answer = self.remote_undo(remote.trace_id, force)
        except MetnosError as e:
            kind = getattr(e, "kind", type(e).__name__)
            if kind == "undo-unknown":
                # It never ran there, or an undo cut short put it back already: nothing the device can do.
                return None
            return {**where, "kind": kind, "message": str(e)}
        remote.restored = list(answer.get("restored", []))
        return None

    def _keep_displaced(self, action: Action) -> dict[str, Any] | None:
        """What stands at the path now, kept in the blob store when it is neither side of the turn:
        what --force overwrites, or whatever a killed undo left half done."""
        try:
            now = take(Path(action.path))
            if same(now, action.before) or same(now, action.after):
                return None
            return take(Path(action.path), blobs=self.blobs)
        except Exception:  # noqa: BLE001 - keeping it is a courtesy, the undo goes on
            return None

    @staticmethod
    def _clear_leftovers(plan: UndoPlan, staging: Path) -> None:
        """What a killed undo may have left: its staging folder, and a hidden copy beside a target on another file system."""
        shutil.rmtree(staging, ignore_errors=True)
        for action in plan.actions:
            Path(leftover_of(Path(action.path))).unlink(missing_ok=True)

    @staticmethod
    def _restored(plan: UndoPlan, journal: UndoJournal) -> list[dict[str, Any]]:
        entries = []
        for index, action in enumerate(plan.actions):
            entry = action.to_json()
            displaced = journal.displaced.get(index)
            if displaced is not None or action.path in {c.path for c in plan.conflicts}:
                entry["displaced"] = displaced
            entries.append(entry)
        return entries


def _put_folder_times_back(actions: list[Action]) -> None:
    """Each folder whose entries the undo changed gets the time it had before the turn's first step
    in it (adding or removing an entry moves a folder's time; the turn's before-images kept it)."""
    times: dict[str, tuple[int, int]] = {}
    for action in actions:
        if action.parent is not None:
            step_and_time = (action.step, action.parent["mtime"])
            times[action.parent["path"]] = min(times.get(action.parent["path"], step_and_time), step_and_time)
    for folder, (_, mtime) in times.items():
        try:
            os.utime(folder, ns=(os.lstat(folder).st_atime_ns, mtime), follow_symlinks=False)
        except OSError:
            pass  # the folder is gone, or not ours to touch: its entries are back, which is what undo promises
