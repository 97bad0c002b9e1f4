"""Asking the cascade for a plan before the model (L0, L1, then L2 on what they found).

``PlanConsultant.consult(text)`` returns what the turn records in
``PlanConsulted``: the layer that resolved the request, or why none did.

* L0: the request's normal form is a key of an approved entry (exact), or
  its vector is within ``cosine`` of one whose slot values are the same
  (a reworded request; other values are L1's business).
* L1: the request's intent (slots made types) has templates that walked at
  least ``min_successes`` good turns with at least two different slot
  values, or one the user approved (an approval says more of a walk than
  any count of unreviewed ones); the best scored (champion) is bound to the
  new values. A template is not proposed when its answer holds numbers the
  model worked out, quotes nothing its steps returned (unless a step acted),
  or a later turn contradicted it (its drop pending in the log).
* Either way a plan runs only while every executor in it is active at the
  version it ran with, it is not an anti-skill, and the validator (L2)
  finds nothing wrong; a candidate it refuses gives way to the next one once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from metnos.runtime.cascade.embedding import Embedder, VectorIndex, load_embedder
from domain.cascade.plan import bind, executors_of, holes_used, plan_id
from domain.cascade.request import differing_words, intent_of, normalise, request_key
from domain.cascade.standing import anti_skill, quotes_nothing, vouched
from domain.cascade.template import derived_digits
from metnos.runtime.cascade.validator import plan_problems
from metnos.settings.cascade import CascadeConfig
from metnos.settings.loader import env_section
from projections.catalog import invocable

# The thresholds are settings (metnos.settings.cascade); the consultant receives them.
CascadeSettings = CascadeConfig


@dataclass
class Consultation:
    layer: str | None = None
    entry: str | None = None
    how: str | None = None
    plan: dict[str, Any] | None = None
    similarity: float | None = None
    reason: str | None = None
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def to_fields(self) -> dict[str, Any]:
        return {"layer": self.layer, "entry": self.entry, "how": self.how, "plan": self.plan,
                "similarity": self.similarity, "reason": self.reason, "rejected": self.rejected}


def stale_reason(plan: dict[str, Any], current: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why a plan may not run with today's executors, or None."""
    for name, version in executors_of(plan):
        now = current.get(name)
        if now is None:
            return f"{name} is no longer active"
        if now["version"] != version:
            return f"{name} is at version {now['version']}, the plan ran {version}"
    return None


def template_score(template: dict[str, Any]) -> float:
    """Laplace-smoothed share of good outcomes: the walks that taught it and its wins, against its losses."""
    good = len(template["sources"]) + template["wins"]
    return (good + 1) / (good + template["losses"] + 2)


class PlanConsultant:
    """The cascade of one runtime: the plans projection, the catalogue, the vectors."""

    def __init__(self, *, plans: Callable[[], dict[str, Any]], current: Callable[[], Mapping[str, Mapping[str, Any]]],
                 now: Callable[[], str], validate: Callable[[dict[str, Any]], list[str]],
                 settings: CascadeSettings, embedder: Callable[[], Embedder] = load_embedder) -> None:
        self._plans = plans
        self._current = current
        self._now = now
        self._validate = validate
        self.settings = settings
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self._index: tuple[Any, VectorIndex] | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    def consult(self, text: str) -> Consultation:
        state = self._plans()
        current = self._current()
        now = self._now()
        result = Consultation()
        candidates = itertools.chain(self._l0(text, state, result), self._l1(text, state, result))
        tried = 0
        seen: set[str] = set()
        for layer, entry_id, how, similarity, plan in candidates:
            same = plan_id(plan)
            if same in seen:
                continue  # the very plan of a candidate already weighed (an approved walk, and L1's template of it)
            seen.add(same)
            why = stale_reason(plan, current)
            anti_key = entry_id if layer == "L1" else state["entries"][entry_id]["plan_id"]
            if why is None and anti_skill(state, anti_key, now):
                why = f"an anti-skill until {state['anti'][anti_key][:10]}: it failed"
            if why is None:
                if tried >= 2:
                    break  # L2 re-proposes once, no more
                tried += 1
                problems = self._validate(plan)
                if problems:
                    why = "L2: " + "; ".join(problems[:3])
            if why is not None:
                result.rejected.append({"layer": layer, "entry": entry_id, "why": why})
                continue
            result.layer, result.entry, result.how, result.similarity, result.plan = layer, entry_id, how, similarity, plan
            return result
        if result.reason is None:
            result.reason = "rejected" if result.rejected else "unknown request"
        return result

    # L0 -----------------------------------------------------------------
    def _l0(self, text: str, state: dict[str, Any], result: Consultation):  # noqa: ANN202 - a generator
        entries = state["entries"]
        exact = state["by_key"].get(request_key(text))
        if exact is not None:
            yield "L0", exact, "exact", 1.0, entries[exact]["plan"]
        index = self._vectors(state)
        if not len(index):
            return
        wanted = [tuple(s) for s in (slot.to_json() for slot in intent_of(text)[1])]
        query = self.embedder.embed([normalise(text)])[0]
        for entry_id, similarity in index.nearest(query, k=3):
            if similarity < self.settings.cosine:
                break
            if entry_id == exact:
                continue
            entry = entries[entry_id]
            if [tuple(s) for s in entry["slots"]] != wanted:
                result.rejected.append({"layer": "L0", "entry": entry_id, "why": "a reworded request with other values"})
                continue
            other = differing_words(text, entry["text"])
            if other:
                result.rejected.append({"layer": "L0", "entry": entry_id,
                                        "why": f"a reworded request that asks something else: {', '.join(sorted(other)[:5])}"})
                continue
            yield "L0", entry_id, f"cosine:{self.embedder.name}", round(similarity, 4), entry["plan"]

    def _vectors(self, state: dict[str, Any]) -> VectorIndex:
        """The live entries' vectors, embedded again only when the set of live entries changed."""
        key = (state.get("rev", 0), len(state["entries"]))  # both only grow
        if self._index is None or self._index[0] != key:
            ids = sorted(k for k, e in state["entries"].items() if e["state"] == "approved")
            vectors = self.embedder.embed([normalise(state["entries"][i]["text"]) for i in ids]) if ids else None
            self._index = (key, VectorIndex(ids, vectors if vectors is not None else [], self.embedder.prefix_dims))
        return self._index[1]

    # L1 -----------------------------------------------------------------
    def _l1(self, text: str, state: dict[str, Any], result: Consultation):  # noqa: ANN202 - a generator
        intent, slots = intent_of(text)
        if not slots:
            return
        now = self._now()
        mature = []
        for template_id, template in state["templates"].get(intent, {}).items():
            distinct = {tuple(v) for v in template["values"]}
            approved = vouched(state, template, now)
            if not approved and (len(template["sources"]) < self.settings.min_successes or len(distinct) < 2):
                continue
            if not holes_used(template["template"]):
                continue  # nothing of the request reaches its steps: not a template
            if derived_digits(template["template"]["answer"], text) or quotes_nothing(template):
                continue  # its answer holds what the model worked out: only the user can approve that
            if template_id in state.get("contradicted", {}):
                continue  # a later turn contradicted it; its drop is being recorded
            mature.append((approved, template_score(template), template["last"], template_id, template))
        # Champion first, challengers after it; a chain the user approved before any the log alone taught.
        for *_rank, template_id, template in sorted(mature, key=lambda m: m[:3], reverse=True):
            yield "L1", template_id, "template", None, bind(template["template"], [s.value for s in slots])


def consultant_from_env(runtime: Any, validate: Callable[[dict[str, Any]], list[str]], env: Mapping[str, str] | None = None,
                        *, settings: CascadeConfig | None = None) -> PlanConsultant:
    """The runtime's consultant, with ``settings`` (default: those ``env`` gives, the command's own when None)."""

    cached = getattr(runtime, "_plan_consultant", None)
    if cached is not None:
        cached._validate = validate  # noqa: SLF001 - the check of this turn's policy
        return cached
    consultant = PlanConsultant(
        plans=lambda: runtime.plans.catch_up(runtime.log),
        current=lambda: invocable(runtime.catalogue_state()),
        now=lambda: runtime.clock().isoformat(),
        validate=validate,
        settings=settings or env_section("cascade", env),
    )
    runtime._plan_consultant = consultant  # type: ignore[attr-defined]
    return consultant
