"""Turns as people and the undo command look for them.

``TurnIndexFold``: every turn with its request, status, answer or failure,
steps, and whether it was undone. ``TurnLinesFold``: the daily turn JSONL of
seeds/002 ch. 11, one line per finished turn with its steps and timings.
"""

from __future__ import annotations

from typing import Any

from domain.turn import Turn
from projections.base import Fold, Handler, iso, key_of
from projections.daily import Lines, LinesFold


class TurnIndexFold(Fold):
    name = "turns"
    version = 1
    cost = 2

    def initial(self) -> dict[str, Any]:
        return {"turns": {}, "order": []}

    def handlers(self) -> dict[type, Handler]:
        return {
            Turn.TurnStarted: self._started,
            Turn.StepInvoked: self._invoked,
            Turn.TurnAnswered: self._answered,
            Turn.TurnFailed: self._failed,
            Turn.TurnUndone: self._undone,
        }

    @staticmethod
    def _started(state: dict[str, Any], event: Any, position: int) -> None:
        key = key_of(event.originator_id)
        state["turns"][key] = {
            "id": key, "started": iso(event.timestamp), "text": event.text, "actor": event.actor,
            "channel": event.channel, "status": "open", "result": None, "steps": 0, "executors": [],
            "undone": False, "position": position,
        }
        state["order"].append(key)

    @staticmethod
    def _invoked(state: dict[str, Any], event: Any, position: int) -> None:
        turn = state["turns"].get(key_of(event.originator_id))
        if turn is not None:
            turn["executors"].append(event.executor)

    @staticmethod
    def _answered(state: dict[str, Any], event: Any, position: int) -> None:
        turn = state["turns"].get(key_of(event.originator_id))
        if turn is not None:
            turn.update(status="answered", result=event.text, steps=event.steps, ended=iso(event.timestamp))

    @staticmethod
    def _failed(state: dict[str, Any], event: Any, position: int) -> None:
        turn = state["turns"].get(key_of(event.originator_id))
        if turn is not None:
            turn.update(status="failed", result=event.message, steps=event.steps, final_kind=event.final_kind, ended=iso(event.timestamp))

    @staticmethod
    def _undone(state: dict[str, Any], event: Any, position: int) -> None:
        turn = state["turns"].get(key_of(event.originator_id))
        if turn is not None:
            turn["undone"] = True


class TurnLinesFold(LinesFold):
    """State: the turns still open, each with the line it will close with."""

    name = "turn_lines"
    version = 1
    cost = 3

    def initial(self) -> dict[str, Any]:
        return {"open": {}}

    def handlers(self) -> dict[type, Handler]:
        return {
            Turn.TurnStarted: self._started,
            Turn.PrefilterRanked: _timing("prefilter_ms"),
            Turn.LLMReplied: _timing("intent_ms"),
            Turn.StepJudged: _timing("vaglio_ms"),
            Turn.StepInvoked: self._invoked,
            Turn.StepRejected: self._rejected,
            Turn.StepIntercepted: self._intercepted,
            Turn.TurnAnswered: self._answered,
            Turn.TurnFailed: self._failed,
        }

    @staticmethod
    def _started(state: dict[str, Any], event: Any, position: int) -> None:
        key = key_of(event.originator_id)
        state["open"][key] = {
            "ts": iso(event.timestamp), "turn_id": key, "actor": event.actor, "channel": event.channel,
            "query": event.text, "steps": [],
            "timings": {"intent_ms": 0, "prefilter_ms": 0, "vaglio_ms": 0, "exec_ms": 0},
        }

    @staticmethod
    def _invoked(state: dict[str, Any], event: Any, position: int) -> None:
        line = state["open"].get(key_of(event.originator_id))
        if line is not None:
            line["timings"]["exec_ms"] += event.exec_ms
            line["steps"].append({"step": event.step, "executor": event.executor, "version": event.version, "ok": event.ok})

    @staticmethod
    def _rejected(state: dict[str, Any], event: Any, position: int) -> None:
        line = state["open"].get(key_of(event.originator_id))
        if line is not None:
            line["steps"].append({"step": event.step, "refused": event.kind})

    @staticmethod
    def _intercepted(state: dict[str, Any], event: Any, position: int) -> None:
        line = state["open"].get(key_of(event.originator_id))
        if line is not None:
            line["steps"].append({"step": event.step, "refused": event.decision.get("outcome")})

    @staticmethod
    def _answered(state: dict[str, Any], event: Any, position: int) -> Lines:
        return _close(state, event, final_kind="answer", final=event.text)

    @staticmethod
    def _failed(state: dict[str, Any], event: Any, position: int) -> Lines:
        return _close(state, event, final_kind=event.final_kind, final=event.message)


def _timing(field: str) -> Handler:
    """A handler adding the event's ``field`` (milliseconds) to the open turn's timings."""

    def add(state: dict[str, Any], event: Any, position: int) -> None:
        line = state["open"].get(key_of(event.originator_id))
        if line is not None:
            line["timings"][field] += getattr(event, field)

    return add


def _close(state: dict[str, Any], event: Any, *, final_kind: str, final: str) -> Lines:
    line = state["open"].pop(key_of(event.originator_id), None)
    if line is None:
        return None
    line.update(final_kind=final_kind, final=final, ended=iso(event.timestamp))
    return [(line["ts"][:10], line)]
