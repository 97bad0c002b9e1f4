"""Where the mnestome functions read from: a booted runtime or a bare log.

With a runtime, the materialised mnestome view is brought up to date and
read; with a log alone, the mnest events are folded in memory (tests, the
benchmark, tools that do not boot the executors).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from domain.mnest import Mnest
from projections.mnestome import MnestomeFold


def log_of(source: Any) -> Any:
    return getattr(source, "log", source) if hasattr(source, "mnestome") else source


def mnestome_state(source: Any) -> dict[str, Any]:
    view = getattr(source, "mnestome", None)
    if view is not None:
        return view.catch_up(source.log)
    fold = MnestomeFold()
    state = fold.initial()
    for nid, topic, record in source.records(1, topics=fold.topics):
        fold.apply_record(state, topic, record, nid)
    return state


def lambdas_of(source: Any) -> dict[str, float]:
    """Per-tag decay rates from the runtime's config (``[mnestome.lambda]``)."""
    config = getattr(source, "config", None) or {}
    table = (config.get("mnestome") or {}).get("lambda") or {}
    return {str(k): float(v) for k, v in table.items()}


def load(log: Any, mnest_id: UUID) -> Mnest | None:
    try:
        return log.repository.get(mnest_id)
    except AggregateNotFoundError:
        return None
