"""From what the loader found on disk to lifecycle events in the log.

The loader says, at boot, which executor versions verify and which fail; this
module records only what changed since the log last heard of them, so a boot
with nothing new appends nothing. A quarantined version stays quarantined
until someone rehabilitates it explicitly, even if its files verify again:
the fix is a human act, and the log says who did it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from eventsourcing.application import AggregateNotFoundError

from domain.executor import (
    ACTIVE,
    BELOW_THRESHOLD,
    QUARANTINED,
    Executor,
    LifecycleError,
    executor_id,
)
from domain.turn import Turn
from metnos.mechanisms.eventlog import EventLog
from metnos.mechanisms.executors.loader import LoadedExecutor, LoadReport, Quarantined
from metnos.mechanisms.executors.signing import legacy_digest

if TYPE_CHECKING:
    from metnos.runtime.birth_reuse import BirthConditions

Clock = Callable[[], datetime]
# What a verified version passed, as its ExecutorVerified event lists it.
_CHECKS = ("signature", "digests", "profile.lock", "schemas", "birth")


class Lifecycle:
    def __init__(self, log: EventLog, clock: Clock, key_id: str) -> None:
        self.log = log
        self.clock = clock
        self.key_id = key_id
        self._touched: dict[Any, Executor] = {}

    def _executor(self, origin: str, name: str) -> Executor:
        ident = executor_id(origin, name)
        found = self._touched.get(ident)
        if found is not None:
            return found
        try:
            found = self.log.repository.get(ident)
        except AggregateNotFoundError:
            found = Executor.register(name=name, origin=origin, at=self.clock())
        self._touched[ident] = found
        return found

    def record_loaded(self, le: LoadedExecutor) -> None:
        e = self._executor(le.origin, le.name)
        state = e.state_of(le.version)
        if state is None:
            at = self.clock()
            e.register_version(version=le.version, digest=le.digest, summary=le.manifest.executor.summary, at=at)
            e.record_signature(version=le.version, digest=le.digest, key_id=self.key_id, at=at)
            e.verify(version=le.version, digest=le.digest, checks=list(_CHECKS), at=at)
            e.activate(version=le.version, at=at)
        elif self._resigned_unchanged(e, le):
            # Re-signed under signature format 2 (init does it for the seeds)
            # with every file format 1 covered unchanged: the same executor,
            # now vouched for whole; the log records the new digest.
            at = self.clock()
            if state == QUARANTINED:
                e.rehabilitate(version=le.version, digest=le.digest, by="re-signed under signature format 2", at=at)
            else:
                e.record_signature(version=le.version, digest=le.digest, key_id=self.key_id, at=at)
                e.verify(version=le.version, digest=le.digest, checks=list(_CHECKS), at=at)
                e.activate(version=le.version, at=at)
        elif state in (ACTIVE, "verified", "below_threshold") and e.versions[le.version]["digest"] != le.digest:
            e.quarantine(
                version=le.version, check="identity", file="manifest.sig", at=self.clock(),
                reason=f"the signed files changed since version {le.version} was registered; a change must bump the version",
            )
        elif state in ("registered", "signed", "verified"):
            at = self.clock()
            if state == "registered":
                e.record_signature(version=le.version, digest=le.digest, key_id=self.key_id, at=at)
            if state != "verified":
                e.verify(version=le.version, digest=le.digest, checks=list(_CHECKS), at=at)
            e.activate(version=le.version, at=at)

    @staticmethod
    def _resigned_unchanged(e: Executor, le: LoadedExecutor) -> bool:
        entry = e.versions[le.version]
        if entry["digest"] == le.digest:
            return False
        if entry["state"] == QUARANTINED:
            if entry.get("check") != "format":
                return False
        elif entry["state"] not in (ACTIVE, "verified", "below_threshold"):
            return False
        return legacy_digest(le.dir) == entry["digest"]

    def record_quarantined(self, q: Quarantined) -> None:
        e = self._executor(q.origin, q.name)
        entry = e.versions.get(q.version)
        if entry is None:
            e.register_version(version=q.version, digest="unverified", summary="", at=self.clock())
        elif entry["state"] == QUARANTINED and entry.get("reason") == q.reason:
            return
        elif entry["state"] == "archived":
            return
        e.quarantine(version=q.version, check=q.check, file=q.file, reason=q.reason, at=self.clock())

    def record_births(self, report: LoadReport, conditions: BirthConditions) -> None:
        """The births that ran and passed at this boot, with what they ran under."""
        for le, tests in report.births_passed:
            e = self._executor(le.origin, le.name)
            if e.state_of(le.version) == ACTIVE and e.versions[le.version]["digest"] == le.digest:
                e.record_birth(version=le.version, digest=le.digest, tests=tests, sandbox=conditions.sandbox,
                               runtime=conditions.runtime, at=self.clock())

    def record_defaults(self, report: LoadReport) -> None:
        for name, le in report.defaults.items():
            e = self._executor(le.origin, name)
            if e.state_of(le.version) == ACTIVE and e.current != le.version:
                e.promote(version=le.version, by="CURRENT", at=self.clock())

    def save(self) -> int:
        pending = [e for e in self._touched.values() if e.pending_events]
        count = sum(len(e.pending_events) for e in pending)
        if pending:
            self.log.save(*pending)
        self._touched.clear()
        return count


def record_boot(log: EventLog, report: LoadReport, clock: Clock, key_id: str,
                births: BirthConditions | None = None) -> int:
    """Record what the loader found; returns how many events were appended.

    With ``births``, the conditions the birth tests ran under, each birth
    that passed is recorded too, so that a later boot may reuse it.
    """
    lifecycle = Lifecycle(log, clock, key_id)
    for le in report.loaded:
        lifecycle.record_loaded(le)
    for q in report.quarantined:
        lifecycle.record_quarantined(q)
    if births is not None:
        lifecycle.record_births(report, births)
    lifecycle.record_defaults(report)
    return lifecycle.save()


def revive_used(runtime: Any, turn_events: Iterable[Any], at: datetime) -> list[Executor]:
    """Executors below threshold that this turn invoked, back to active (seeds/000 ch. 6: "use
    resumed"): the aggregates to commit with the turn's last events."""
    used = {e.executor for e in turn_events if isinstance(e, Turn.StepInvoked) and e.ok}
    if not used:
        return []
    turn_id = next((str(e.originator_id) for e in turn_events), "")
    revived = []
    # The catalogue as the turn saw it: catching it up here would be a write of its own inside the turn's close.
    for entry in runtime.catalogue.state()["executors"].values():
        version = entry["current"]
        if entry["name"] not in used or version is None or entry["versions"].get(version, {}).get("state") != BELOW_THRESHOLD:
            continue
        executor: Executor = runtime.log.repository.get(executor_id(entry["origin"], entry["name"]))
        try:
            executor.revive(version=version, by="use", reason=f"used in turn {turn_id}", at=at)
        except LifecycleError:
            continue
        revived.append(executor)
    return revived


def move_to_archive(workspace: Any, origin: str, name: str, version: str) -> None:
    """An archived version's folder goes to ``<origin>/.archive/NAME/VERSION`` (seeds/000 ch. 6): kept, never loaded."""
    origin_dir = workspace.executors_origin_dir(origin)
    folder = origin_dir / name / version
    if folder.exists():
        target = origin_dir / ".archive" / name / version
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), str(target))
