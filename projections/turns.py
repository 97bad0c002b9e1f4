"""Turns as people and the undo command look for them.

``TurnIndexFold``: every turn with its request, status, answer or failure,
steps, and whether it was undone. ``TurnLinesFold``: the daily turn JSONL of
seeds/002 ch. 11, one line per finished turn with its steps and timings.
"""

from __future__ import annotations

from typing import Any

from domain.turn import Turn
from projections.base import Fold, key_of
from projections.daily import LinesFold

_STEP_EVENTS = (Turn.StepInvoked, Turn.StepRejected, Turn.StepIntercepted)


class TurnIndexFold(Fold):
    name = "turns"
    version = 1
    events = (Turn.TurnStarted, Turn.StepInvoked, Turn.TurnAnswered, Turn.TurnFailed, Turn.TurnUndone)

    def initial(self) -> dict[str, Any]:
        return {"turns": {}, "order": []}

    def apply(self, state: dict[str, Any], event: Any, position: int) -> None:
        key = key_of(event.originator_id)
        if isinstance(event, Turn.TurnStarted):
            state["turns"][key] = {
                "id": key, "started": event.timestamp.isoformat(), "text": event.text, "actor": event.actor,
                "channel": event.channel, "status": "open", "result": None, "steps": 0, "executors": [],
                "undone": False, "position": position,
            }
            state["order"].append(key)
            return
        turn = state["turns"].get(key)
        if turn is None:
            return
        if isinstance(event, Turn.StepInvoked):
            turn["executors"].append(event.executor)
        elif isinstance(event, Turn.TurnAnswered):
            turn.update(status="answered", result=event.text, steps=event.steps, ended=event.timestamp.isoformat())
        elif isinstance(event, Turn.TurnFailed):
            turn.update(status="failed", result=event.message, steps=event.steps, final_kind=event.final_kind, ended=event.timestamp.isoformat())
        elif isinstance(event, Turn.TurnUndone):
            turn["undone"] = True


class TurnLinesFold(LinesFold):
    name = "turn_lines"
    version = 1
    events = (
        Turn.TurnStarted, Turn.PrefilterRanked, Turn.LLMReplied, Turn.StepJudged, Turn.StepInvoked,
        Turn.StepRejected, Turn.StepIntercepted, Turn.TurnAnswered, Turn.TurnFailed,
    )

    def initial(self) -> dict[str, Any]:
        return {"open": {}}

    def emit(self, state: dict[str, Any], event: Any, position: int) -> list[tuple[str, dict[str, Any]]]:
        key = key_of(event.originator_id)
        if isinstance(event, Turn.TurnStarted):
            state["open"][key] = {
                "ts": event.timestamp.isoformat(), "turn_id": key, "actor": event.actor, "channel": event.channel,
                "query": event.text, "steps": [],
                "timings": {"intent_ms": 0, "prefilter_ms": 0, "vaglio_ms": 0, "exec_ms": 0},
            }
            return []
        line = state["open"].get(key)
        if line is None:
            return []
        timings = line["timings"]
        if isinstance(event, Turn.PrefilterRanked):
            timings["prefilter_ms"] += event.prefilter_ms
        elif isinstance(event, Turn.LLMReplied):
            timings["intent_ms"] += event.intent_ms
        elif isinstance(event, Turn.StepJudged):
            timings["vaglio_ms"] += event.vaglio_ms
        elif isinstance(event, Turn.StepInvoked):
            timings["exec_ms"] += event.exec_ms
            line["steps"].append({"step": event.step, "executor": event.executor, "version": event.version, "ok": event.ok})
        elif isinstance(event, (Turn.StepRejected, Turn.StepIntercepted)):
            kind = event.kind if isinstance(event, Turn.StepRejected) else event.decision.get("outcome")
            line["steps"].append({"step": event.step, "refused": kind})
        elif isinstance(event, (Turn.TurnAnswered, Turn.TurnFailed)):
            del state["open"][key]
            answered = isinstance(event, Turn.TurnAnswered)
            line.update(
                final_kind="answer" if answered else event.final_kind,
                final=event.text if answered else event.message,
                ended=event.timestamp.isoformat(),
            )
            return [(line["ts"][:10], line)]
        return []
