"""The life of an executor, as events (seeds/000 ch. 6).

One aggregate per executor name and origin; its versions live side by side,
each with its own state, and one of them is current. The states:

    registered -> signed -> verified -> active
    active -> quarantined | below_threshold | fused
    quarantined -> active (rehabilitated after a valid signature) | archived
    below_threshold -> active (used again, or kept by the user) | archived;  fused -> archived | active (defused);  archived -> active
"""

from __future__ import annotations

from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate, name_id

ACTIVE = "active"
QUARANTINED = "quarantined"
BELOW_THRESHOLD = "below_threshold"
STATES = ("registered", "signed", "verified", ACTIVE, QUARANTINED, BELOW_THRESHOLD, "fused", "archived")


class LifecycleError(ValueError):
    """A transition the lifecycle does not allow (e.g. activating a quarantined version)."""


def executor_id(origin: str, name: str):  # noqa: ANN201 - a UUID
    return name_id("executor", f"{origin}/{name}")


class Executor(MetnosAggregate):
    class ExecutorRegistered(Created):
        name: str
        origin: str

    class VersionRegistered(DomainEvent):
        version: str
        digest: str
        summary: str

        def apply(self, executor: Executor) -> None:
            executor.versions[self.version] = {"state": "registered", "digest": self.digest, "summary": self.summary, "reason": None}

    class ExecutorSigned(DomainEvent):
        version: str
        digest: str
        key_id: str

        def apply(self, executor: Executor) -> None:
            executor._set(self.version, "signed", digest=self.digest)

    class ExecutorVerified(DomainEvent):
        version: str
        digest: str
        checks: list

        def apply(self, executor: Executor) -> None:
            executor._set(self.version, "verified", digest=self.digest)

    class BirthTestsPassed(DomainEvent):
        """The version's birth tests passed, for these signed files, in this
        sandbox, under this runtime: while all three stay the same, a later
        boot may take this result instead of running them again."""

        version: str
        digest: str
        tests: str  # blake3 of the birth tests that ran (not every signature covers them)
        sandbox: str
        runtime: str

        def apply(self, executor: Executor) -> None:
            executor.versions[self.version]["birth"] = self.conditions()

        def conditions(self) -> dict[str, str]:
            return {"digest": self.digest, "tests": self.tests, "sandbox": self.sandbox, "runtime": self.runtime}

    class ExecutorActivated(DomainEvent):
        version: str

        def apply(self, executor: Executor) -> None:
            executor._set(self.version, ACTIVE, reason=None)

    class ExecutorQuarantined(DomainEvent):
        version: str
        check: str
        file: str | None
        reason: str

        def apply(self, executor: Executor) -> None:
            # A quarantine voids any earlier birth pass: whatever is lifted
            # later is born again before it may run.
            executor._set(self.version, QUARANTINED, reason=self.reason, check=self.check)
            executor.versions[self.version].pop("birth", None)

    class ExecutorRehabilitated(DomainEvent):
        version: str
        digest: str
        by: str

        def apply(self, executor: Executor) -> None:
            executor._set(self.version, ACTIVE, digest=self.digest, reason=None)

    class VersionPromoted(DomainEvent):
        version: str
        previous: str | None
        by: str

        def apply(self, executor: Executor) -> None:
            executor.current = self.version

    class ExecutorBelowThreshold(DomainEvent):
        version: str
        uses: int
        window_days: int

        def apply(self, executor: Executor) -> None:
            executor._set(self.version, "below_threshold")

    class ExecutorRevived(DomainEvent):
        """A version below threshold is active again: it was used, or the user kept it (seeds/000 ch. 6)."""

        version: str
        by: str
        reason: str

        def apply(self, executor: Executor) -> None:
            executor._set(self.version, ACTIVE, reason=None)

    class ExecutorFused(DomainEvent):
        version: str
        into: str

        def apply(self, executor: Executor) -> None:
            executor._set(self.version, "fused")

    class ExecutorDefused(DomainEvent):
        """A fusion undone: the version is active again (seeds/000 ch. 6)."""

        version: str
        by: str

        def apply(self, executor: Executor) -> None:
            executor._set(self.version, ACTIVE, reason=None)

    class ExecutorArchived(DomainEvent):
        version: str
        reason: str
        by: str

        def apply(self, executor: Executor) -> None:
            executor._set(self.version, "archived", reason=self.reason)

    def __init__(self, name: str, origin: str) -> None:
        self.name = name
        self.origin = origin
        self.versions: dict[str, dict[str, Any]] = {}
        self.current: str | None = None

    @classmethod
    def register(cls, *, name: str, origin: str, at: Any) -> Executor:
        return cls._create(cls.ExecutorRegistered, id=executor_id(origin, name), name=name, origin=origin, timestamp=at)

    def _set(self, version: str, state: str, **fields: Any) -> None:
        self.versions[version].update(state=state, **fields)

    def state_of(self, version: str) -> str | None:
        entry = self.versions.get(version)
        return entry["state"] if entry else None

    # Commands: each checks the transition, then records the event.
    def register_version(self, *, version: str, digest: str, summary: str, at: Any) -> None:
        if version in self.versions:
            msg = f"{self.name} {version} is already registered"
            raise LifecycleError(msg)
        self.trigger_event(self.VersionRegistered, version=version, digest=digest, summary=summary, timestamp=at)

    def record_signature(self, *, version: str, digest: str, key_id: str, at: Any) -> None:
        self._require(version)
        self.trigger_event(self.ExecutorSigned, version=version, digest=digest, key_id=key_id, timestamp=at)

    def verify(self, *, version: str, digest: str, checks: list, at: Any) -> None:
        if self.state_of(version) == QUARANTINED:
            msg = f"{self.name} {version} is quarantined; rehabilitate it instead"
            raise LifecycleError(msg)
        self._require(version)
        self.trigger_event(self.ExecutorVerified, version=version, digest=digest, checks=checks, timestamp=at)

    def record_birth(self, *, version: str, digest: str, tests: str, sandbox: str, runtime: str, at: Any) -> None:
        self._require(version)
        self.trigger_event(self.BirthTestsPassed, version=version, digest=digest, tests=tests, sandbox=sandbox,
                           runtime=runtime, timestamp=at)

    def birth_passed(self, version: str, *, digest: str, tests: str, sandbox: str, runtime: str) -> bool:
        """Whether the last birth pass recorded for an active ``version`` holds for exactly these conditions."""
        entry = self.versions.get(version)
        if entry is None or entry["state"] != ACTIVE:
            return False
        return entry.get("birth") == {"digest": digest, "tests": tests, "sandbox": sandbox, "runtime": runtime}

    def activate(self, *, version: str, at: Any) -> None:
        if self.state_of(version) not in ("verified", "below_threshold"):
            msg = f"{self.name} {version} is {self.state_of(version)}, not verified: it cannot be activated"
            raise LifecycleError(msg)
        self.trigger_event(self.ExecutorActivated, version=version, timestamp=at)

    def quarantine(self, *, version: str, check: str, reason: str, at: Any, file: str | None = None) -> None:
        self._require(version)
        if self.state_of(version) == "archived":
            msg = f"{self.name} {version} is archived"
            raise LifecycleError(msg)
        self.trigger_event(self.ExecutorQuarantined, version=version, check=check, file=file, reason=reason, timestamp=at)

    def rehabilitate(self, *, version: str, digest: str, by: str, at: Any) -> None:
        if self.state_of(version) not in (QUARANTINED, "archived"):
            msg = f"{self.name} {version} is {self.state_of(version)}; only a quarantined or archived version can be rehabilitated"
            raise LifecycleError(msg)
        self.trigger_event(self.ExecutorRehabilitated, version=version, digest=digest, by=by, timestamp=at)

    def promote(self, *, version: str, by: str, at: Any) -> None:
        if self.state_of(version) != ACTIVE:
            msg = f"{self.name} {version} is {self.state_of(version)}; only an active version can become current"
            raise LifecycleError(msg)
        if self.current != version:
            self.trigger_event(self.VersionPromoted, version=version, previous=self.current, by=by, timestamp=at)

    def mark_below_threshold(self, *, version: str, uses: int, window_days: int, at: Any) -> None:
        if self.state_of(version) != ACTIVE:
            msg = f"{self.name} {version} is not active"
            raise LifecycleError(msg)
        self.trigger_event(self.ExecutorBelowThreshold, version=version, uses=uses, window_days=window_days, timestamp=at)

    def revive(self, *, version: str, by: str, reason: str, at: Any) -> None:
        if self.state_of(version) != "below_threshold":
            msg = f"{self.name} {version} is {self.state_of(version)}, not below threshold"
            raise LifecycleError(msg)
        self.trigger_event(self.ExecutorRevived, version=version, by=by, reason=reason, timestamp=at)

    def fuse(self, *, version: str, into: str, at: Any) -> None:
        if self.state_of(version) != ACTIVE:
            msg = f"{self.name} {version} is not active"
            raise LifecycleError(msg)
        self.trigger_event(self.ExecutorFused, version=version, into=into, timestamp=at)

    def defuse(self, *, version: str, by: str, at: Any) -> None:
        if self.state_of(version) not in ("fused", "archived"):
            msg = f"{self.name} {version} is {self.state_of(version)}, not fused"
            raise LifecycleError(msg)
        self.trigger_event(self.ExecutorDefused, version=version, by=by, timestamp=at)

    def archive(self, *, version: str, reason: str, by: str, at: Any) -> None:
        self._require(version)
        if self.state_of(version) == "archived":
            return
        self.trigger_event(self.ExecutorArchived, version=version, reason=reason, by=by, timestamp=at)

    def _require(self, version: str) -> None:
        if version not in self.versions:
            msg = f"{self.name} has no version {version}"
            raise LifecycleError(msg)
