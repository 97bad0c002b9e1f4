"""Approving, listing and forgetting plans: the service every surface calls (CLI today, channels next)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from domain.plan import PlanEntry, plan_entry_id
from metnos.runtime.cascade.consult import stale_reason
from domain.cascade.standing import quotes_nothing
from domain.cascade.template import derived_digits
from domain.errors import MetnosError
from projections.catalog import invocable


class PlanBookError(MetnosError):
    """A plan command that cannot be done, and why."""


class PlanBook:
    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime

    def _state(self) -> dict[str, Any]:
        return self.runtime.plans.catch_up(self.runtime.log)

    def _turn(self, prefix: str) -> str:
        turns = self.runtime.turns.catch_up(self.runtime.log)["turns"]
        matches = [t for t in turns if t.startswith(prefix)]
        if not matches:
            raise PlanBookError(f"no turn starts with {prefix!r}; see `metnos turns list`")
        if len(matches) > 1:
            raise PlanBookError(f"{prefix!r} matches {len(matches)} turns; give more of the id")
        return matches[0]

    def approve(self, turn_prefix: str, *, by: str) -> dict[str, Any]:
        """Make a good turn's plan an L0 entry: the same request then runs it with no model call."""
        turn_id = self._turn(turn_prefix)
        state = self._state()
        candidate = state["candidates"].get(turn_id)
        if candidate is None:
            turn = self.runtime.turns.state()["turns"][turn_id]
            why = ("it was undone" if turn.get("undone") else
                   f"it is {turn['status']}" if turn["status"] != "answered" else
                   state["unlearnt"][turn_id] + "; it would answer with them again whatever they are then"
                   if turn_id in state["unlearnt"] else
                   "one of its steps failed, was declined or used the scratchpad, or its output was too large to keep whole")
            raise PlanBookError(f"turn {turn_id[:8]} has no plan to approve: {why}")
        entry_id = str(plan_entry_id(turn_id))
        existing = state["entries"].get(entry_id)
        at = self.runtime.clock()
        if existing is not None and existing["state"] == "approved":
            raise PlanBookError(f"turn {turn_id[:8]}'s plan is already approved as {entry_id[:8]}")
        if existing is not None:
            entry = self.runtime.log.repository.get(UUID(entry_id))
            entry.trigger_event(PlanEntry.PlanReapproved, by=by, timestamp=at)
        else:
            entry = PlanEntry.approve(turn_id=turn_id, by=by, at=at)
        self.runtime.log.save(entry)
        return self.show(entry_id)

    def forget(self, ref: str, *, by: str) -> dict[str, Any]:
        entry = self._entry(ref)
        if entry["state"] != "approved":
            raise PlanBookError(f"plan {entry['id'][:8]} is already {entry['state']}")
        aggregate = self.runtime.log.repository.get(UUID(entry["id"]))
        aggregate.trigger_event(PlanEntry.PlanForgotten, by=by, timestamp=self.runtime.clock())
        self.runtime.log.save(aggregate)
        return self.show(entry["id"])

    def expire(self, entry_id: str, reason: str) -> None:
        aggregate = self.runtime.log.repository.get(UUID(entry_id))
        aggregate.trigger_event(PlanEntry.PlanExpired, reason=reason, timestamp=self.runtime.clock())
        self.runtime.log.save(aggregate)

    def _entry(self, ref: str) -> dict[str, Any]:
        entries = self._state()["entries"]
        matches = [e for k, e in entries.items() if k.startswith(ref) or e["turn_id"].startswith(ref)]
        if not matches:
            raise PlanBookError(f"no plan or source turn starts with {ref!r}; see `metnos plans list`")
        if len(matches) > 1:
            raise PlanBookError(f"{ref!r} matches {len(matches)} plans; give more of the id")
        return matches[0]

    def show(self, ref: str) -> dict[str, Any]:
        entry = dict(self._entry(ref))
        entry["stale"] = self._stale(entry)
        entry["fixed_numbers"] = derived_digits(entry["plan"]["answer"], entry["text"])
        candidate = self._state()["candidates"].get(entry["turn_id"]) or {}
        entry["quotes_nothing"] = quotes_nothing({"template": entry["plan"], "acted": candidate.get("acted", False)})
        entry["anti_skill_until"] = self._state()["anti"].get(entry["plan_id"])
        return entry

    def list(self) -> list[dict[str, Any]]:
        state = self._state()
        rows = []
        for entry in sorted(state["entries"].values(), key=lambda e: e["approved"]):
            rows.append({**entry, "stale": self._stale(entry), "anti_skill_until": state["anti"].get(entry["plan_id"])})
        return rows

    def templates(self) -> list[dict[str, Any]]:
        rows = []
        state = self._state()
        for intent, templates in sorted(state["templates"].items()):
            for template_id, t in templates.items():
                rows.append({"intent": intent, "id": template_id, "walks": len(t["sources"]),
                             "contradicted": (state["contradicted"].get(template_id) or {}).get("reason"),
                             "distinct_values": len({tuple(v) for v in t["values"]}), "wins": t["wins"],
                             "losses": t["losses"], "executors": [s["executor"] for s in t["template"]["steps"]]})
        return rows

    def offer(self, turn_id: str) -> str | None:
        """The line that offers to approve a good turn's plan, or None when there is nothing to offer."""
        state = self._state()
        candidate = state["candidates"].get(turn_id)
        if candidate is None or candidate["key"] in state["by_key"]:
            return None
        return f"to answer this again without the model: metnos plans approve {turn_id}"

    def _stale(self, entry: dict[str, Any]) -> str | None:

        return stale_reason(entry["plan"], invocable(self.runtime.catalogue_state()))
