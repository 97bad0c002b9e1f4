"""Recording the drop of the templates later turns contradicted.

The plans projection sees a contradiction as it folds the contradicting turn
(projections/plans.py says which turns contradict which templates) and keeps
it pending, never proposing the template meanwhile; this records the drop as
a ``TemplateDropped`` event, so that what the cascade stopped trusting, when
and why, is in the log like every other decision. Called when a turn closes
and when one is undone; a drop a crash kept from being written is written by
the next call, since the contradiction stays pending until then.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import IntegrityError

from domain.plan import TemplateDrop


def record_drops(runtime: Any) -> list[dict[str, Any]]:
    """Write a ``TemplateDropped`` for every contradiction pending; the drops written."""
    pending = list(runtime.plans.catch_up(runtime.log)["contradicted"].values())
    if not pending:
        return []
    at = runtime.clock()
    drops = [TemplateDrop.drop(intent=p["intent"], template_id=p["template_id"], turn_id=p["turn_id"], reason=p["reason"], at=at)
             for p in pending]
    try:
        runtime.log.save(*drops)
    except IntegrityError:
        # Another process wrote the same drops first (their ids are the template's and the turn's).
        return []
    runtime.plans.catch_up(runtime.log)
    return pending
