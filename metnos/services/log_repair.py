"""``metnos log check`` and ``metnos log salvage``: a damaged log read for what it still holds.

``check`` reads every record (metnos.mechanisms.store.survey) and names what it cannot read, by
position, with the turns it touches. ``salvage`` writes every intact event into a new data folder,
never touching the old one: each aggregate keeps its events up to the first one lost (an aggregate
is rebuilt from versions in a row), each turn cut there is closed with ``TurnAbandoned`` whose
reason says the log was damaged, the rest of the data folder (kept files, executors, models) is
linked or copied across, and the projections are folded from the new log.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent

from domain.errors import MetnosError
from domain.turn import OPEN, Turn
from metnos.mechanisms.clock import system_clock
from metnos.mechanisms.eventlog import DEFAULT_PERSISTENCE_MODULE, EventLog
from metnos.mechanisms.store.environment import DATA_FILE
from metnos.mechanisms.store.survey import Survey, survey
from metnos.mechanisms.store.views import ViewStore
from metnos.runtime.booted import Runtime
from metnos.settings.loader import env_section
from metnos.settings.workspace import Workspace
from replay.rebuild import rebuild as refold

# What the old data folder holds that is folded from the log: made anew, never carried across.
DERIVED = frozenset({"log", "views", "turns", ".audit", ".runtime"})
DAMAGED = "damaged"
_BATCH = 1000


class SalvageRefused(MetnosError):
    """The salvage cannot start: its target is not new, or the log is not one it can read."""


@dataclass
class Salvaged:
    """What a salvage wrote."""

    survey: Survey
    data_dir: Path
    events: int = 0
    turns_whole: list[str] = field(default_factory=list)
    turns_cut: dict[str, str] = field(default_factory=dict)  # turn id -> why
    aggregates_lost: list[str] = field(default_factory=list)  # no first event: nothing of them to keep
    dropped: int = 0  # intact events after an aggregate's first lost one
    projections: dict[str, int] = field(default_factory=dict)


def log_dir(workspace: Workspace) -> Path:
    """The folder of this workspace's LMDB log; refused for a log in another store."""
    settings = env_section("log").as_environment()
    module = settings.get("PERSISTENCE_MODULE") or DEFAULT_PERSISTENCE_MODULE
    if module not in (DEFAULT_PERSISTENCE_MODULE, "metnos.store.lmdb"):
        msg = f"`metnos log` reads LMDB logs only, and PERSISTENCE_MODULE is {module!r}; use that store's own tools to check it"
        raise SalvageRefused(msg)
    return Path(settings.get("LMDB_PATH") or workspace.log_dir)


@dataclass
class Checked:
    """A survey, and the kind of each aggregate it found damaged (``Turn``; None: unknown)."""

    survey: Survey
    kinds: dict[str, str | None]

    @property
    def turns(self) -> list[str]:
        return sorted(a for a, kind in self.kinds.items() if kind == "Turn")


def check(workspace: Workspace) -> Checked:
    with _decoder(workspace) as decode:
        found = survey(log_dir(workspace), decode)
    # A turn whose every event was lost is still a turn the views have folded.
    folded = _folded_turns(workspace) if found.touched() else set()
    kinds = {a: found.kind_of(a) or ("Turn" if a in folded else None) for a in found.touched()}
    return Checked(found, kinds)


def _folded_turns(workspace: Workspace) -> set[str]:
    """The turn ids the turns view holds; none when it cannot be read (it is derived data, and may be damaged too)."""
    if not (workspace.views_dir / DATA_FILE).is_file():
        return set()
    try:
        store = ViewStore.open(workspace.views_dir, "turns")
    except Exception:  # noqa: BLE001 - as below: a views store that cannot be opened names no turn
        return set()
    try:
        raw = store.get_state("turns")
        return set(orjson.loads(raw).get("turns", {})) if raw else set()
    except Exception:  # noqa: BLE001 - the views may be damaged too: the turns are then those the log itself names
        return set()
    finally:
        store.close()


def salvage(workspace: Workspace, new_dir: Path, *, clock: Callable[[], Any] = system_clock) -> Salvaged:
    """Every intact event of the workspace's log into ``new_dir``, a new data folder."""
    old = log_dir(workspace)
    pointed = sorted(k for k in env_section("log").as_environment() if k in ("LMDB_PATH", "METNOS_LMDB_PATH"))
    if pointed:
        # The new data folder's projections are folded by a runtime that reads the log where LMDB_PATH says: the old one.
        msg = (f"{pointed[0]} points the log away from the data folder, and the salvaged one would be folded from it; "
               f"copy {old} to {workspace.log_dir}, unset {pointed[0]}, and run `metnos log salvage` again")
        raise SalvageRefused(msg)
    new_dir = new_dir.expanduser().absolute()
    if new_dir.exists() and (not new_dir.is_dir() or any(new_dir.iterdir())):
        raise SalvageRefused(f"{new_dir} already exists and is not empty; name a new folder for the salvaged data")
    if os.path.realpath(new_dir).startswith(os.path.realpath(workspace.data_dir) + os.sep):
        raise SalvageRefused(f"{new_dir} is inside the data folder {workspace.data_dir}; name a folder outside it")
    with _decoder(workspace) as decode:
        found = survey(old, decode)
    new_dir.mkdir(parents=True, exist_ok=True)
    done = Salvaged(survey=found, data_dir=new_dir)
    _carry_across(workspace.data_dir, new_dir)
    target = Workspace(data_dir=new_dir, config_dir=workspace.config_dir)
    log = EventLog(target, env={"PERSISTENCE_MODULE": DEFAULT_PERSISTENCE_MODULE, "LMDB_PATH": str(target.log_dir)})
    try:
        kept, cut_at = _kept(found, done)
        for start in range(0, len(kept), _BATCH):
            log.recorder.insert_events(kept[start : start + _BATCH])
        done.events = len(kept)
        _close_cut_turns(log, found, kept, cut_at, done, clock)
    finally:
        log.close()
    with Runtime.boot(target, birth=False) as runtime:
        done.projections = refold(runtime, [])
    return done


def _kept(found: Survey, done: Salvaged) -> tuple[list[StoredEvent], dict[str, int]]:
    """The events to write, in log order, and, for each aggregate cut, the first version it lost."""
    versions: dict[str, set[int]] = {}
    for event in found.intact.values():
        versions.setdefault(str(event.originator_id), set()).add(event.originator_version)
    cut_at: dict[str, int] = {}
    touched = found.touched()
    for aggregate in set(versions) | set(touched):
        have = versions.get(aggregate, set())
        first_gap = next(v for v in count(1) if v not in have)
        lost = touched.get(aggregate, [])
        if lost or first_gap <= max(have, default=0):
            cut_at[aggregate] = min([first_gap, *lost])
    kept = []
    for position in sorted(found.intact):
        event = found.intact[position]
        aggregate = str(event.originator_id)
        if aggregate in cut_at and event.originator_version >= cut_at[aggregate]:
            done.dropped += 1
            continue
        kept.append(event)
    done.aggregates_lost = sorted(a for a, v in cut_at.items() if v == 1)
    return kept, cut_at


def _close_cut_turns(log: EventLog, found: Survey, kept: list[StoredEvent], cut_at: dict[str, int], done: Salvaged,
                     clock: Callable[[], Any]) -> None:
    started = {str(e.originator_id) for e in kept if e.originator_version == 1 and e.topic.endswith("Turn.TurnStarted")}
    unnamed = len(found.unattributed())
    for turn_id in sorted(started):
        turn = log.repository.get(UUID(turn_id))
        if turn_id in cut_at:
            lost = sum(1 for d in found.damage if d.aggregate == turn_id)
            reason = (f"{DAMAGED}: the log was damaged and `metnos log salvage` cut this turn at its event {cut_at[turn_id]} "
                      f"({lost} of its events could not be read)")
        elif turn.status == OPEN and unnamed:
            reason = (f"{DAMAGED}: the log was damaged ({unnamed} records that cannot be tied to a turn) and this turn "
                      "was open: `metnos log salvage` closed it, as it may have lost its end")
        else:
            done.turns_whole.append(turn_id)
            continue
        done.turns_cut[turn_id] = reason
        if turn.status != OPEN:
            continue  # it ended before the events lost (its undo was lost, say): nothing to close
        events = list(log.events.get(UUID(turn_id)))
        reached = max((e.step for e in events if isinstance(getattr(e, "step", None), int)), default=0)
        turn.record(Turn.TurnAbandoned, at=clock(), step=reached, events=len(events), reason=reason)
        log.save(turn)


def _carry_across(old: Path, new: Path) -> None:
    """What the data folder holds besides the log and what is folded from it: hard links where the
    file system allows (the kept files and models are large, and never changed in place), else copies."""
    for entry in sorted(old.iterdir()) if old.is_dir() else ():
        if entry.name in DERIVED:
            continue
        target = new / entry.name
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, target)


def _link_or_copy(source: str | Path, target: str | Path) -> None:
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


@contextmanager
def _decoder(workspace: Workspace) -> Iterator[Callable[[StoredEvent], Any]]:
    """The application's own mapper (its transcoder, compressor and cipher), from a scratch log that holds nothing."""
    with tempfile.TemporaryDirectory(prefix="metnos-decoder-") as scratch:
        log = EventLog(workspace, env={"PERSISTENCE_MODULE": DEFAULT_PERSISTENCE_MODULE, "LMDB_PATH": scratch})
        try:
            yield log.mapper.to_domain_event
        finally:
            log.close()
