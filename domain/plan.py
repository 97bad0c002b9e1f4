"""An approved plan: a good turn the user asked Metnos to run again without the model (L0).

One aggregate per source turn. The plan itself is not copied here: it is a
fold of the source turn's events (projections/plans.py), so undoing that
turn, or a new version of one of its executors, takes it out of use.
"""

from __future__ import annotations

from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate, name_id


def plan_entry_id(turn_id: str):  # noqa: ANN201 - a UUID
    return name_id("plan", turn_id)


class PlanEntry(MetnosAggregate):
    class PlanApproved(Created):
        turn_id: str
        by: str

    class PlanReapproved(DomainEvent):
        by: str

        def apply(self, entry: PlanEntry) -> None:
            entry.live = True

    class PlanForgotten(DomainEvent):
        by: str

        def apply(self, entry: PlanEntry) -> None:
            entry.live = False

    class PlanExpired(DomainEvent):
        reason: str

        def apply(self, entry: PlanEntry) -> None:
            entry.live = False

    def __init__(self, turn_id: str, by: str) -> None:
        self.turn_id = turn_id
        self.live = True

    @classmethod
    def approve(cls, *, turn_id: str, by: str, at: Any) -> PlanEntry:
        return cls._create(cls.PlanApproved, id=plan_entry_id(turn_id), turn_id=turn_id, by=by, timestamp=at)


def template_drop_id(template_id: str, turn_id: str):  # noqa: ANN201 - a UUID
    return name_id("plan-template-drop", f"{template_id}:{turn_id}")


class TemplateDrop(MetnosAggregate):
    """An L1 template a later turn contradicted, dropped: its walks, wins and losses
    no longer count, and a chain of the same steps is learnt again from new walks only.

    One aggregate per template and contradicting turn. ``reason`` says how the
    turn contradicted it; it names turns and steps, never what they read."""

    class TemplateDropped(Created):
        intent: str
        template_id: str
        turn_id: str
        reason: str

    def __init__(self, intent: str, template_id: str, turn_id: str, reason: str) -> None:
        self.template_id = template_id

    @classmethod
    def drop(cls, *, intent: str, template_id: str, turn_id: str, reason: str, at: Any) -> TemplateDrop:
        return cls._create(cls.TemplateDropped, id=template_drop_id(template_id, turn_id), intent=intent,
                           template_id=template_id, turn_id=turn_id, reason=reason, timestamp=at)
