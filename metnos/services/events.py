"""The log as a list of events, filtered (``metnos events``)."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from eventsourcing.domain import DomainEvent

from domain.errors import MetnosError
from metnos.mechanisms.eventlog import EventLog
# What a user who meets a damaged log is told to do; re-exported for the CLI's last line of defence.
from metnos.mechanisms.store.errors import LOG_DAMAGE_ADVICE
from metnos.services.queries import event_state
from metnos.settings.loader import in_force


__all__ = ["LOG_DAMAGE_ADVICE", "UnknownTopic", "check_topic", "event_topics", "events"]


def events(*, aggregate: str | None = None, topic: str | None = None, since: datetime | None = None,
           until: datetime | None = None, from_id: int = 1, limit: int = 0) -> Iterator[tuple[Any, datetime | None, dict[str, Any]]]:
    """Each stored event that passes the filters, as (its notification, its time, its own fields); the log is
    opened now and closed when the iteration ends."""
    if topic:
        check_topic(topic)
    log = EventLog(in_force().workspace)
    return _filtered(log, aggregate, topic, since, until, from_id, limit)


class UnknownTopic(MetnosError):
    """``--topic`` names text no event type's topic holds: the listing would be empty whatever the log holds."""


def event_topics() -> list[str]:
    """The topic of every kind of event Metnos records (each domain module's event classes)."""
    import domain  # the package, to walk its modules: each is imported only when a topic is checked

    for module in pkgutil.walk_packages(domain.__path__, "domain."):
        importlib.import_module(module.name)
    found: set[str] = set()
    pending = list(DomainEvent.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("domain."):
            found.add(f"{cls.__module__}:{cls.__qualname__}")  # what get_topic writes, without its cache
    return sorted(found)


def check_topic(text: str) -> None:
    topics = event_topics()
    if any(text in topic for topic in topics):
        return
    kinds = sorted({topic.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for topic in topics})
    close = difflib.get_close_matches(text.rsplit(".", 1)[-1], kinds, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; event types include {', '.join(kinds[:8])}, ..."
    msg = f"no event type has {text!r} in its topic, so no event could match{hint} (`metnos events` lists them all)"
    raise UnknownTopic(msg)


def _filtered(log: EventLog, aggregate: str | None, topic: str | None, since: datetime | None, until: datetime | None,
              from_id: int, limit: int) -> Iterator[tuple[Any, datetime | None, dict[str, Any]]]:
    try:
        shown = 0
        for n in log.notifications(start=from_id):
            if aggregate and not str(n.originator_id).startswith(aggregate):
                continue
            if topic and topic not in n.topic:
                continue
            try:
                event = log.mapper.to_domain_event(n)
            except Exception as e:  # noqa: BLE001 - a bad record is reported, not fatal to the listing
                msg = f"event {n.id} ({n.topic}) cannot be decoded: {e}; {LOG_DAMAGE_ADVICE}"
                raise MetnosError(msg) from None
            state = event_state(event)
            ts = getattr(event, "timestamp", None)
            if since and (ts is None or ts < since):
                continue
            if until and (ts is None or ts >= until):
                continue
            yield n, ts, state
            shown += 1
            if limit and shown >= limit:
                return
    finally:
        log.close()
