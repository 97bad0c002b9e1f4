"""Rebuilding read models: empty a projection and fold it again from the log.

A view whose fold version changed is rebuilt by itself when it next catches
up (projections/base.py); this is the explicit, whole-log version, for
upgrades and for checking that a live view equals its rebuild.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metnos.errors import MetnosError


class UnknownProjection(MetnosError):
    """No projection by that name."""


def rebuild(runtime: Any, names: list[str] | None = None, *, progress: Callable[[str, int, int], None] | None = None) -> dict[str, int]:
    """Rebuild the named projections (all when ``names`` is empty); returns name -> bytes of the rebuilt view."""
    views = runtime.projections()
    chosen = names or sorted(views)
    unknown = [n for n in chosen if n not in views]
    if unknown:
        raise UnknownProjection(f"no projection named {', '.join(unknown)}; projections: {', '.join(sorted(views))}")
    for name in chosen:
        views[name].reset()
    passes = {name: views[name].begin() for name in chosen}
    head = runtime.log.recorder.max_notification_id() or 0
    # One scan of the log feeds every fold, each event straight to the handlers
    # that read its topic; an event no fold reads is never decoded.
    feeders: dict[str, list[Any]] = {}
    for p in passes.values():
        for topic, feed in p.feeders().items():
            feeders.setdefault(topic, []).append(feed)
    log = runtime.log
    scan = getattr(log.recorder, "scan", None)
    decode = getattr(log.mapper, "decode", None)
    label = "+".join(chosen)
    last = head
    try:
        if scan is not None and decode is not None:
            for nid, oid, version, topic, state in scan(1, topics=frozenset(feeders)):
                event = decode(topic, oid, version, state)
                for feed in feeders[topic]:
                    feed(event, nid)
                if progress is not None and nid % 4096 == 0:
                    progress(label, nid, head)
                last = nid
        else:
            for nid, event in log.domain_events(1, topics=tuple(feeders)):
                for feed in feeders[event_topic(event)]:
                    feed(event, nid)
                last = nid
    finally:
        for p in passes.values():
            close = getattr(p, "close", None)
            if close is not None:
                close()
    # Events that landed during the scan were folded too: the views stand past them.
    head = max(head, last)
    for p in passes.values():
        p.finish(head)
    if progress is not None:
        progress(label, head, head)
    return {name: len(views[name].state_bytes()) for name in chosen}


def event_topic(event: Any) -> str:
    from eventsourcing.utils import get_topic

    return get_topic(type(event))
