"""What every Metnos aggregate shares: time and identity come in as arguments.

The domain is replayed; a clock read or a random id inside it would make a
replay diverge. eventsourcing stamps events with the wall clock when no
timestamp is given, so here that fallback raises instead.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate


# What eventsourcing puts on every event; an event's own state is the rest.
ENVELOPE = ("originator_id", "originator_version", "timestamp", "originator_topic")


def event_state(event: Any) -> dict[str, Any]:
    """An event's own fields, without the envelope every event carries."""
    return {k: v for k, v in vars(event).items() if k not in ENVELOPE}


class ClockNotInjected(RuntimeError):
    """An event was created without a timestamp from the caller."""


class DomainEvent(Aggregate.Event):
    @staticmethod
    def create_timestamp() -> datetime:
        msg = "domain events take their timestamp from the caller (a recorded clock port)"
        raise ClockNotInjected(msg)


class Created(Aggregate.Created, DomainEvent):
    @staticmethod
    def create_timestamp() -> datetime:
        return DomainEvent.create_timestamp()


class MetnosAggregate(Aggregate):
    """Aggregates whose ids are derived from names or given, never random."""

    @staticmethod
    def create_id(*_: Any, **__: Any) -> UUID:
        msg = "pass id= explicitly; Metnos ids come from the ids port or a name"
        raise NotImplementedError(msg)


def name_id(kind: str, name: str) -> UUID:
    """A stable id for an aggregate known by name (an executor, a mnest key)."""
    return uuid5(NAMESPACE_URL, f"metnos:{kind}:{name}")
