"""A mnest: the trace of data that passed from one executor to another (seeds/004).

One aggregate per key ``(src_executor, src_version, dst_executor, dst_version)``;
its id is derived from the key, so there is never more than one mnest per
tuple. A proto-mnest (ch. 8) is the same aggregate with no ``dst_version``:
its destination is a name the model wanted but that no executor answers to.

States (ch. 7):

    proto      -> superseded (its executor was born: an active mnest carries it on)
               -> purged (weight under the proto threshold)
    active     -> decaying (weight under the decay threshold) | superseded
    decaying   -> active (used again) | archived
    superseded -> archived (after a grace period) | active (used again)
    archived   -> active (used again)

The weight is never stored by a command: each event carries its inputs (uses,
timestamps) and both this aggregate and the mnestome fold compute the weight
with :mod:`domain.mnest_weight`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from domain.base import Created, DomainEvent, MetnosAggregate, name_id
from domain import mnest_weight as mw

PROTO = "proto"
ACTIVE = "active"
DECAYING = "decaying"
SUPERSEDED = "superseded"
ARCHIVED = "archived"
PURGED = "purged"
STATES = (PROTO, ACTIVE, DECAYING, SUPERSEDED, ARCHIVED, PURGED)
# States that take part in the live graph (what the planner and synt read).
LIVE = frozenset({PROTO, ACTIVE, DECAYING})

ORIGINS = ("observed", "seed", "proto")


class MnestError(ValueError):
    """A transition the mnest lifecycle does not allow."""


def mnest_key(src: str, src_version: str, dst: str, dst_version: str | None) -> str:
    return f"{src}@{src_version}->{dst}@{dst_version or ''}"


def mnest_id(src: str, src_version: str, dst: str, dst_version: str | None) -> UUID:
    return name_id("mnest", mnest_key(src, src_version, dst, dst_version))


def initial_weight(origin: str, uses: int, lam: float, carried: dict[str, Any] | None, at: datetime) -> float:
    """The weight a mnest is born with.

    A seed mnest starts at the bootstrap weight; an observed one as if it had
    weight 0 before the turn; one that realises a proto-mnest continues the
    proto's weight, decayed to the moment of birth.
    """
    if origin == "seed":
        return mw.BOOTSTRAP_WEIGHT
    if carried:
        since = datetime.fromisoformat(carried["weight_at"])
        return mw.reinforced(carried["weight"], mw.days_between(since, at), lam, uses)
    return mw.reinforced(0.0, 0.0, lam, uses)


class Mnest(MetnosAggregate):
    class MnestCreated(Created):
        src_executor: str
        src_version: str
        dst_executor: str
        dst_version: str
        uses: int
        decay_lambda: float
        tags: list
        origin: str
        turn_id: str | None
        carried: dict | None

    class ProtoMnestRecorded(Created):
        src_executor: str
        src_version: str
        dst_executor: str
        uses: int
        decay_lambda: float
        tags: list
        desired_signature: dict
        turn_id: str | None

    class MnestReinforced(DomainEvent):
        uses: int
        turn_id: str | None

        def apply(self, m: Mnest) -> None:
            m.weight = mw.reinforced(m.weight, mw.days_between(m.weight_at, self.timestamp), m.decay_lambda, self.uses)
            m.weight_at = self.timestamp
            m.ts_last = self.timestamp
            m.uses += self.uses
            m.archive_proposed = False
            m.superseded_by = None
            m.state = PROTO if m.dst_version is None else ACTIVE

    class MnestDecayed(DomainEvent):
        def apply(self, m: Mnest) -> None:
            m.weight = mw.weight_at(m.weight, m.weight_at, self.timestamp, m.decay_lambda)
            m.weight_at = self.timestamp

    class MnestDemoted(DomainEvent):
        threshold: float

        def apply(self, m: Mnest) -> None:
            m.state = DECAYING

    class MnestArchiveProposed(DomainEvent):
        idle_days: int

        def apply(self, m: Mnest) -> None:
            m.archive_proposed = True

    class MnestArchived(DomainEvent):
        reason: str
        by: str

        def apply(self, m: Mnest) -> None:
            m.state = ARCHIVED
            m.archive_proposed = False

    class MnestMarkedPrivate(DomainEvent):
        """The host's mark (seeds/002 ch. 11.2.4): a private mnest is the host's habit, not read in a guest's turn."""

        private: bool
        by: str

        def apply(self, m: Mnest) -> None:
            m.private = self.private

    class MnestSuperseded(DomainEvent):
        by: str
        reason: str

        def apply(self, m: Mnest) -> None:
            m.state = SUPERSEDED
            m.superseded_by = self.by
            m.superseded_at = self.timestamp

    class ProtoMnestPurged(DomainEvent):
        threshold: float

        def apply(self, m: Mnest) -> None:
            m.state = PURGED

    def __init__(self, src_executor: str, src_version: str, dst_executor: str, uses: int, decay_lambda: float, tags: list,
                 dst_version: str | None = None, origin: str = "observed", carried: dict | None = None,
                 desired_signature: dict | None = None, **_: Any) -> None:
        at: datetime = self._created_at()
        self.src_executor = src_executor
        self.src_version = src_version
        self.dst_executor = dst_executor
        self.dst_version = dst_version
        self.decay_lambda = decay_lambda
        self.tags = list(tags)
        self.origin = origin
        self.desired_signature = desired_signature
        self.weight = initial_weight(origin, uses, decay_lambda, carried, at)
        self.weight_at = at
        self.uses = uses + (carried["uses"] if carried else 0)
        self.ts_first = datetime.fromisoformat(carried["ts_first"]) if carried else at
        self.ts_last = at
        self.state = PROTO if dst_version is None else ACTIVE
        self.archive_proposed = False
        self.superseded_by: str | None = None
        self.superseded_at: datetime | None = None
        self.private = False

    def _created_at(self) -> datetime:
        # eventsourcing sets created_on before calling __init__.
        return self.created_on

    # Creation --------------------------------------------------------------
    @classmethod
    def observe(cls, *, src: str, src_version: str, dst: str, dst_version: str, uses: int, at: datetime,
                tags: list[str], decay_lambda: float = mw.DEFAULT_LAMBDA, turn_id: str | None = None,
                carried: dict[str, Any] | None = None) -> Mnest:
        """A first passing from ``src`` to ``dst`` (``carried``: the proto it realises)."""
        _check_uses(uses)
        if not dst_version:
            msg = "an observed mnest has a destination version; record a proto-mnest instead"
            raise MnestError(msg)
        return cls._create(
            cls.MnestCreated, id=mnest_id(src, src_version, dst, dst_version), timestamp=at,
            src_executor=src, src_version=src_version, dst_executor=dst, dst_version=dst_version, uses=uses,
            decay_lambda=decay_lambda, tags=sorted(set(tags)), origin="proto" if carried else "observed",
            turn_id=turn_id, carried=carried,
        )

    @classmethod
    def seed(cls, *, src: str, src_version: str, dst: str, dst_version: str, at: datetime, tags: list[str],
             decay_lambda: float = mw.DEFAULT_LAMBDA) -> Mnest:
        """A mnest known before any use (created at first boot) at the bootstrap weight."""
        return cls._create(
            cls.MnestCreated, id=mnest_id(src, src_version, dst, dst_version), timestamp=at,
            src_executor=src, src_version=src_version, dst_executor=dst, dst_version=dst_version, uses=1,
            decay_lambda=decay_lambda, tags=sorted(set(tags)), origin="seed", turn_id=None, carried=None,
        )

    @classmethod
    def record_proto(cls, *, src: str, src_version: str, desired: str, uses: int, at: datetime, tags: list[str],
                     desired_signature: dict[str, Any], decay_lambda: float = mw.DEFAULT_LAMBDA,
                     turn_id: str | None = None) -> Mnest:
        _check_uses(uses)
        return cls._create(
            cls.ProtoMnestRecorded, id=mnest_id(src, src_version, desired, None), timestamp=at,
            src_executor=src, src_version=src_version, dst_executor=desired, uses=uses, decay_lambda=decay_lambda,
            tags=sorted(set(tags)), desired_signature=desired_signature, turn_id=turn_id,
        )

    # Commands --------------------------------------------------------------
    def reinforce(self, *, uses: int, at: datetime, turn_id: str | None = None) -> None:
        _check_uses(uses)
        self._not_before(at)
        self.trigger_event(self.MnestReinforced, uses=uses, turn_id=turn_id, timestamp=at)

    def decay(self, *, at: datetime) -> None:
        self._not_before(at)
        self.trigger_event(self.MnestDecayed, timestamp=at)

    def demote(self, *, at: datetime) -> None:
        if self.state != ACTIVE:
            msg = f"only an active mnest can start decaying; this one is {self.state}"
            raise MnestError(msg)
        if self.weight_now(at) >= mw.DECAY_WEIGHT:
            msg = f"weight {self.weight_now(at):.4f} is not under the decay threshold {mw.DECAY_WEIGHT}"
            raise MnestError(msg)
        self.trigger_event(self.MnestDemoted, threshold=mw.DECAY_WEIGHT, timestamp=at)

    def propose_archive(self, *, at: datetime) -> None:
        if self.state != DECAYING or self.archive_proposed:
            msg = f"archival is proposed once, for a decaying mnest; this one is {self.state}"
            raise MnestError(msg)
        idle = mw.days_between(self.ts_last, at)
        if self.weight_now(at) >= mw.ARCHIVE_WEIGHT or idle < mw.ARCHIVE_IDLE_DAYS:
            msg = "archival needs a weight under the archive threshold and 90 idle days"
            raise MnestError(msg)
        self.trigger_event(self.MnestArchiveProposed, idle_days=int(idle), timestamp=at)

    def archive(self, *, at: datetime, reason: str, by: str) -> None:
        if self.state not in (DECAYING, SUPERSEDED):
            msg = f"only a decaying or superseded mnest is archived; this one is {self.state}"
            raise MnestError(msg)
        self.trigger_event(self.MnestArchived, reason=reason, by=by, timestamp=at)

    def mark_private(self, *, private: bool, by: str, at: datetime) -> None:
        if getattr(self, "private", False) != private:
            self.trigger_event(self.MnestMarkedPrivate, private=private, by=by, timestamp=at)

    def supersede(self, *, at: datetime, by: UUID | str, reason: str) -> None:
        if self.state not in LIVE:
            msg = f"a {self.state} mnest cannot be superseded"
            raise MnestError(msg)
        self.trigger_event(self.MnestSuperseded, by=str(by), reason=reason, timestamp=at)

    def purge(self, *, at: datetime) -> None:
        if self.state != PROTO:
            msg = f"only proto-mnests are purged; this one is {self.state}"
            raise MnestError(msg)
        if self.weight_now(at) >= mw.MIN_PROTO_WEIGHT:
            msg = f"weight {self.weight_now(at):.4f} is not under the proto threshold {mw.MIN_PROTO_WEIGHT}"
            raise MnestError(msg)
        self.trigger_event(self.ProtoMnestPurged, threshold=mw.MIN_PROTO_WEIGHT, timestamp=at)

    # Queries ---------------------------------------------------------------
    @property
    def key(self) -> str:
        return mnest_key(self.src_executor, self.src_version, self.dst_executor, self.dst_version)

    def weight_now(self, at: datetime) -> float:
        return mw.weight_at(self.weight, self.weight_at, at, self.decay_lambda)

    def carry(self) -> dict[str, Any]:
        """What an active mnest takes over from this proto when its executor is born."""
        return {
            "proto_id": str(self.id), "weight": self.weight, "weight_at": self.weight_at.isoformat(),
            "uses": self.uses, "ts_first": self.ts_first.isoformat(),
        }

    def _not_before(self, at: datetime) -> None:
        if at < self.weight_at:
            msg = f"{self.key}: {at.isoformat()} is before its last update {self.weight_at.isoformat()}"
            raise mw.TimeRunsBackwards(msg)


def _check_uses(uses: int) -> None:
    if not isinstance(uses, int) or isinstance(uses, bool) or uses < 1:
        msg = f"uses must be a positive integer, got {uses!r}"
        raise MnestError(msg)
