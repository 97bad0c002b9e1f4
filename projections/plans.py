"""The cascade's plans, folded from the log (metnos/cascade).

State:

* ``candidates``: every answered turn whose steps that ran all succeeded (those that never ran left out), with
  its plan (:mod:`domain.cascade.plan`), request key, intent and slots, and the
  plan it followed if the cascade gave one: what ``metnos plans approve TURN``
  can approve and what L1 learns from. Only a turn that ended ``TurnAnswered``
  is one: a turn that ended otherwise (failed, refused, its answer unverified)
  teaches nothing.
* ``unlearnt``: turn id -> why an answered turn's plan is not a candidate
  though its steps all succeeded: it would carry what its steps returned
  (:mod:`domain.cascade.provenance`).
* ``entries``: the approved plans (L0), by entry id, with their state
  (approved, forgotten, expired, undone), uses and last use; ``by_key`` the
  live entry of each request key; ``entry_of_turn`` the entry approved from
  each turn (what tells L1 a template's walk was approved, in one lookup).
* ``templates``: intent key -> template id -> the generalised plan, the turns
  that walked it and their slot values, its wins and losses when the cascade
  proposed it (champion/challenger).
* ``anti``: plan or template id -> until when it is an anti-skill, never proposed.
* ``contradicted``: template id -> the later turn that contradicted it and how,
  until its ``TemplateDropped`` is recorded (metnos/runtime/cascade/contradiction.py);
  never proposed meanwhile. ``dropped``: template id -> its last drop.
* ``counts``: hits per layer, misses, abandons, drops.
* ``rev``: bumped whenever the set of live entries changes, so a lookup
  rebuilds its vector index only then.

A turn being written is kept in ``open`` until it ends. Undoing a turn takes
its candidate, its entry and its share of a template away; undoing a turn
that followed a template contradicts that template.

A template is contradicted by a later turn when (1) the model, not the
cascade, walked a request of the same intent and answered it with another
chain of steps (a template the user approved a walk of excepted: one
unreviewed walk does not outweigh the user's word); (2) a turn followed the
template to its answer and that answer was refused (an ``AnswerRejected``
before the plan was abandoned), or the turn still ended ``TurnFailed`` (the
answer check's ``unverified``, for one); (3) a turn that followed it was
undone. An interrupted turn contradicts nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from domain.plan import PlanEntry, TemplateDrop
from domain.turn import Turn
from domain.cascade.plan import generalise, plan_id, plan_of, steps_that_ran
from domain.cascade.provenance import carried
from domain.cascade.request import intent_of, request_key
from domain.cascade.standing import vouched
from metnos.mechanisms.store.event_record import Record
from projections.base import Fold, Handler, reads

ANTI_SKILL_DAYS = 30


class PlansFold(Fold):
    name = "plans"
    version = 6
    cost = 2

    def initial(self) -> dict[str, Any]:
        return {"open": {}, "candidates": {}, "entries": {}, "by_key": {}, "templates": {}, "anti": {},
                "counts": {"L0": 0, "L1": 0, "miss": 0, "abandoned": 0, "dropped": 0}, "rev": 0, "entry_of_turn": {},
                "unlearnt": {}, "contradicted": {}, "dropped": {}}

    def handlers(self) -> dict[type, Handler]:
        return {
            Turn.TurnStarted: _started,
            Turn.PlanConsulted: _consulted,
            Turn.PlanAbandoned: _abandoned,
            Turn.StepProposed: _proposed,
            Turn.StepInvoked: _invoked,
            Turn.ObservationRecorded: _observed,
            Turn.StepIntercepted: _never_ran,
            Turn.StepRejected: _never_ran,
            Turn.BuiltinCalled: _unclean,
            Turn.AnswerRejected: _answer_rejected,
            Turn.ApprovalAnswered: _approval_answered,
            Turn.ApprovalWaived: _acted,
            Turn.TurnAnswered: _answered,
            Turn.TurnFailed: _failed,
            Turn.TurnInterrupted: _ended_badly,
            Turn.TurnAbandoned: _ended_badly,
            Turn.TurnUndone: _undone,
            PlanEntry.PlanApproved: _approved,
            PlanEntry.PlanReapproved: _reapproved,
            PlanEntry.PlanForgotten: _retired("forgotten"),
            PlanEntry.PlanExpired: _retired("expired"),
            TemplateDrop.TemplateDropped: _dropped,
        }


@reads("text")
def _started(state: dict[str, Any], record: Record, position: int) -> None:
    # A follow-up ("and the last one?") means what it means after its conversation: no plan is learnt from its words alone.
    follows = bool((record.get("conversation") or {}).get("earlier"))
    state["open"][record["originator_id"]] = {"text": record["text"], "steps": {}, "skipped": [], "clean": not follows, "consulted": None,
                                              "followed": None, "acted": False}


@reads("layer", "entry")
def _consulted(state: dict[str, Any], record: Record, position: int) -> None:
    turn = state["open"].get(record["originator_id"])
    layer = record["layer"]
    state["counts"][layer or "miss"] = state["counts"].get(layer or "miss", 0) + 1
    if turn is not None and layer is not None:
        turn["consulted"] = {"layer": layer, "entry": record["entry"]}
        # Kept when the plan is abandoned: what the turn then did is not the model's own walk.
        turn["followed"] = dict(turn["consulted"])


@reads()
def _abandoned(state: dict[str, Any], record: Record, position: int) -> None:
    turn = state["open"].get(record["originator_id"])
    state["counts"]["abandoned"] += 1
    if turn is not None and turn["consulted"] is not None:
        _lost(state, turn["consulted"], record["timestamp"])
        turn["consulted"] = None


@reads("step", "executor", "args")
def _proposed(state: dict[str, Any], record: Record, position: int) -> None:
    turn = state["open"].get(record["originator_id"])
    if turn is not None:
        turn["steps"][str(record["step"])] = {"executor": record["executor"], "args": record["args"], "version": None, "output": None}


@reads("step", "version", "ok")
def _invoked(state: dict[str, Any], record: Record, position: int) -> None:
    turn = state["open"].get(record["originator_id"])
    if turn is None:
        return
    step = turn["steps"].get(str(record["step"]))
    if step is None or not record["ok"]:
        turn["clean"] = False
        return
    step["version"] = record["version"]


@reads("step", "ok", "observation", "spill")
def _observed(state: dict[str, Any], record: Record, position: int) -> None:
    turn = state["open"].get(record["originator_id"])
    if turn is None:
        return
    step = turn["steps"].get(str(record["step"]))
    # A spilled output is cut in the log: an answer made from it cannot be slotted.
    if step is None or not record["ok"] or (record["spill"] or {}).get("spilled"):
        turn["clean"] = False
        return
    step["output"] = record["observation"]


@reads("step")
def _never_ran(state: dict[str, Any], record: Record, position: int) -> None:
    """A call the loop did not run (a duplicate read, a form it refused): the
    plan is what ran, so it leaves this step out."""
    turn = state["open"].get(record["originator_id"])
    if turn is not None:
        turn.setdefault("skipped", []).append(int(record["step"]))


@reads("approved")
def _approval_answered(state: dict[str, Any], record: Record, position: int) -> None:
    if record["approved"]:
        _acted(state, record, position)


@reads()
def _acted(state: dict[str, Any], record: Record, position: int) -> None:
    """A step the user approved (or the autonomy level let run): the turn did something."""
    turn = state["open"].get(record["originator_id"])
    if turn is not None:
        turn["acted"] = True


@reads()
def _unclean(state: dict[str, Any], record: Record, position: int) -> None:
    turn = state["open"].get(record["originator_id"])
    if turn is not None:
        turn["clean"] = False


@reads("text")
def _answered(state: dict[str, Any], record: Record, position: int) -> None:
    turn_id = record["originator_id"]
    turn = state["open"].pop(turn_id, None)
    if turn is None:
        return
    at = record["timestamp"]
    if turn["consulted"] is not None:
        _won(state, turn["consulted"], at)
    steps = steps_that_ran({int(k): s for k, s in turn["steps"].items()}, set(turn.get("skipped", ())))
    if not turn["clean"] or steps is None or any(s["version"] is None or s["output"] is None for s in steps):
        return
    plan = plan_of(steps, record["text"])
    intent, slots = intent_of(turn["text"])
    template = generalise(plan, slots) if slots else None
    # One template per chain of steps: the model words its answer anew each time,
    # and the latest wording is the one a hit gives.
    tid = plan_id({"steps": template["steps"], "answer": []}) if template is not None else None
    if tid is not None and turn["followed"] is None:
        _walked(state, intent, tid, turn_id, at)
    why = carried(plan, {i: s["output"] for i, s in enumerate(steps, start=1)}, turn["text"])
    if why is not None:
        state["unlearnt"][turn_id] = why
        return
    state["candidates"][turn_id] = {
        "turn_id": turn_id, "text": turn["text"], "key": request_key(turn["text"]), "intent": intent,
        "slots": [s.to_json() for s in slots], "plan": plan, "plan_id": plan_id(plan), "at": at,
        "followed": turn["followed"], "acted": turn["acted"],
    }
    if template is not None and tid is not None:
        entry = state["templates"].setdefault(intent, {}).setdefault(
            tid, {"template": template, "sources": [], "values": [], "wins": 0, "losses": 0, "last": at})
        entry["template"] = template
        entry["acted"] = turn["acted"]
        entry["sources"].append(turn_id)
        entry["values"].append([s.value for s in slots])
        entry["last"] = at


def _walked(state: dict[str, Any], intent: str, tid: str, turn_id: str, at: str) -> None:
    """The model answered a request of this intent with the chain ``tid``: every
    other chain the log alone taught for it is contradicted."""
    for other, template in state["templates"].get(intent, {}).items():
        if other != tid and template["sources"] and not vouched(state, template, at):
            _contradict(state, intent, other, turn_id, f"turn {turn_id[:8]}, walked by the model, answered a request of "
                        "this intent with another chain of steps")


def _contradict(state: dict[str, Any], intent: str, tid: str, turn_id: str, reason: str) -> None:
    state["contradicted"].setdefault(tid, {"intent": intent, "template_id": tid, "turn_id": turn_id, "reason": reason})


def _ended_badly(state: dict[str, Any], record: Record, position: int) -> None:
    turn = state["open"].pop(record["originator_id"], None)
    if turn is not None and turn["consulted"] is not None:
        _lost(state, turn["consulted"], record["timestamp"])


_ended_badly.reads = frozenset()  # type: ignore[attr-defined]


@reads()
def _answer_rejected(state: dict[str, Any], record: Record, position: int) -> None:
    """An answer refused while the turn still followed a template (never abandoned): the template's."""
    turn = state["open"].get(record["originator_id"])
    if turn is not None:
        _refused(state, turn["consulted"], record["originator_id"], "gave an answer that was refused")


def _refused(state: dict[str, Any], consulted: dict[str, Any] | None, turn_id: str, how: str) -> None:
    if consulted is None or consulted["layer"] != "L1" or _template(state, consulted["entry"]) is None:
        return
    intent = next(i for i, ts in state["templates"].items() if consulted["entry"] in ts)
    _contradict(state, intent, consulted["entry"], turn_id, f"turn {turn_id[:8]} followed it to its answer and {how}")


@reads()
def _failed(state: dict[str, Any], record: Record, position: int) -> None:
    """A turn that ended without an answer; one that followed a template to its
    answer (never abandoned) had that answer refused, which contradicts it."""
    turn = state["open"].get(record["originator_id"])
    if turn is not None:
        _refused(state, turn["consulted"], record["originator_id"], "did not end answered")
    _ended_badly(state, record, position)


@reads()
def _undone(state: dict[str, Any], record: Record, position: int) -> None:
    turn_id = record["originator_id"]
    candidate = state["candidates"].pop(turn_id, None)
    state["unlearnt"].pop(turn_id, None)
    followed = (candidate or {}).get("followed") or {}
    if followed.get("layer") == "L1" and _template(state, followed["entry"]) is not None:
        intent = next(i for i, ts in state["templates"].items() if followed["entry"] in ts)
        _contradict(state, intent, followed["entry"], turn_id, f"turn {turn_id[:8]}, which followed it, was undone")
    for entry in state["entries"].values():
        if entry["turn_id"] == turn_id and entry["state"] == "approved":
            entry["state"] = "undone"
            state["by_key"].pop(entry["key"], None)
            state["rev"] += 1
    for templates in state["templates"].values():
        for template in templates.values():
            while turn_id in template["sources"]:
                i = template["sources"].index(turn_id)
                del template["sources"][i], template["values"][i]


@reads("turn_id", "by")
def _approved(state: dict[str, Any], record: Record, position: int) -> None:
    candidate = state["candidates"].get(record["turn_id"])
    if candidate is None:
        return  # the command refuses this before recording; an old log may still hold one
    entry_id = record["originator_id"]
    state["entries"][entry_id] = {
        "id": entry_id, "turn_id": record["turn_id"], "text": candidate["text"], "key": candidate["key"],
        "slots": candidate["slots"], "plan": candidate["plan"], "plan_id": candidate["plan_id"], "state": "approved",
        "approved": record["timestamp"], "by": record["by"], "uses": 0, "last_used": record["timestamp"],
    }
    state["by_key"][candidate["key"]] = entry_id
    state["entry_of_turn"][record["turn_id"]] = entry_id
    state["rev"] += 1


@reads("by")
def _reapproved(state: dict[str, Any], record: Record, position: int) -> None:
    entry = state["entries"].get(record["originator_id"])
    if entry is not None and entry["turn_id"] in state["candidates"]:
        entry.update(state="approved", last_used=record["timestamp"])
        state["by_key"][entry["key"]] = entry["id"]
        state["rev"] += 1


def _retired(how: str) -> Handler:
    @reads()
    def retire(state: dict[str, Any], record: Record, position: int) -> None:
        entry = state["entries"].get(record["originator_id"])
        if entry is None:
            return
        entry["state"] = how
        state["rev"] += 1
        if state["by_key"].get(entry["key"]) == entry["id"]:
            del state["by_key"][entry["key"]]

    return retire


@reads("intent", "template_id", "turn_id", "reason")
def _dropped(state: dict[str, Any], record: Record, position: int) -> None:
    tid = record["template_id"]
    templates = state["templates"].get(record["intent"], {})
    templates.pop(tid, None)
    if not templates:
        state["templates"].pop(record["intent"], None)
    pending = state["contradicted"].get(tid)
    if pending is not None and pending["turn_id"] == record["turn_id"]:
        del state["contradicted"][tid]
    state["dropped"][tid] = {"intent": record["intent"], "turn_id": record["turn_id"], "reason": record["reason"], "at": record["timestamp"]}
    state["counts"]["dropped"] += 1


def _won(state: dict[str, Any], consulted: dict[str, Any], at: str) -> None:
    if consulted["layer"] == "L0":
        entry = state["entries"].get(consulted["entry"])
        if entry is not None:
            entry["uses"] += 1
            entry["last_used"] = at
        return
    template = _template(state, consulted["entry"])
    if template is not None:
        template["wins"] += 1


def _lost(state: dict[str, Any], consulted: dict[str, Any], at: str) -> None:
    """A plan the cascade proposed went wrong: not proposed again for 30 days."""
    until = (datetime.fromisoformat(at) + timedelta(days=ANTI_SKILL_DAYS)).isoformat()
    if consulted["layer"] == "L0":
        entry = state["entries"].get(consulted["entry"])
        if entry is not None:
            state["anti"][entry["plan_id"]] = until
        return
    template = _template(state, consulted["entry"])
    if template is not None:
        template["losses"] += 1
        state["anti"][consulted["entry"]] = until


def _template(state: dict[str, Any], template_id: str | None) -> dict[str, Any] | None:
    for templates in state["templates"].values():
        if template_id in templates:
            return templates[template_id]
    return None
