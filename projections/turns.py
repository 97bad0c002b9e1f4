"""Turns as people and the undo command look for them.

``TurnIndexFold``: every turn with its request, status, answer or failure,
steps, and whether it was undone. ``TurnLinesFold``: the daily turn JSONL of
seeds/002 ch. 11, one line per finished turn with its steps and timings.
"""

from __future__ import annotations

from typing import Any

from domain.turn import Turn
from metnos.mechanisms.store.event_record import Record
from projections.base import Fold, Handler, reads
from projections.daily import Lines, LinesFold


class TurnIndexFold(Fold):
    name = "turns"
    version = 3
    cost = 2

    def initial(self) -> dict[str, Any]:
        return {"turns": {}, "order": []}

    def handlers(self) -> dict[type, Handler]:
        return {
            Turn.TurnStarted: self._started,
            Turn.StepInvoked: self._invoked,
            Turn.TurnAnswered: self._answered,
            Turn.TurnFailed: self._failed,
            Turn.TurnInterrupted: self._interrupted,
            Turn.TurnAbandoned: self._abandoned,
            Turn.TurnUndone: self._undone,
        }

    @staticmethod
    @reads("text", "actor", "channel", "conversation")
    def _started(state: dict[str, Any], record: Record, position: int) -> None:
        key = record["originator_id"]
        state["turns"][key] = {
            "id": key, "started": record["timestamp"], "text": record["text"], "actor": record["actor"],
            "channel": record["channel"], "status": "open", "result": None, "steps": 0, "executors": [],
            "undone": False, "position": position,
        }
        # Only a turn of a conversation says which (a turn alone, and every turn before conversations, folds as it did).
        conversation = ((record["conversation"] if "conversation" in record else None) or {}).get("id")
        if conversation:
            state["turns"][key]["conversation"] = conversation
        state["order"].append(key)

    @staticmethod
    @reads("executor")
    def _invoked(state: dict[str, Any], record: Record, position: int) -> None:
        turn = state["turns"].get(record["originator_id"])
        if turn is not None:
            turn["executors"].append(record["executor"])

    @staticmethod
    @reads("text", "steps")
    def _answered(state: dict[str, Any], record: Record, position: int) -> None:
        turn = state["turns"].get(record["originator_id"])
        if turn is not None:
            turn.update(status="answered", result=record["text"], steps=record["steps"], ended=record["timestamp"])

    @staticmethod
    @reads("message", "steps", "final_kind", "status")
    def _failed(state: dict[str, Any], record: Record, position: int) -> None:
        turn = state["turns"].get(record["originator_id"])
        if turn is not None:
            turn.update(status=record["status"], result=record["message"], steps=record["steps"], final_kind=record["final_kind"], ended=record["timestamp"])

    @staticmethod
    @reads("signal", "step", "during")
    def _interrupted(state: dict[str, Any], record: Record, position: int) -> None:
        turn = state["turns"].get(record["originator_id"])
        if turn is not None:
            message = f"interrupted by {record['signal']} {record['during']}, at step {record['step']}"
            turn.update(status="interrupted", result=message, steps=record["step"], ended=record["timestamp"])

    @staticmethod
    @reads("step", "reason")
    def _abandoned(state: dict[str, Any], record: Record, position: int) -> None:
        turn = state["turns"].get(record["originator_id"])
        if turn is not None:
            turn.update(status="abandoned", result=f"abandoned at step {record['step']}: {record['reason']}", steps=record["step"], ended=record["timestamp"])

    @staticmethod
    @reads()
    def _undone(state: dict[str, Any], record: Record, position: int) -> None:
        turn = state["turns"].get(record["originator_id"])
        if turn is not None:
            turn["undone"] = True


class TurnLinesFold(LinesFold):
    """State: the turns still open, each with the line it will close with."""

    name = "turn_lines"
    version = 2
    cost = 4

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
            Turn.TurnInterrupted: self._interrupted,
            Turn.TurnAbandoned: self._abandoned,
        }

    @staticmethod
    @reads("actor", "channel", "text")
    def _started(state: dict[str, Any], record: Record, position: int) -> None:
        key = record["originator_id"]
        state["open"][key] = {
            "ts": record["timestamp"], "turn_id": key, "actor": record["actor"], "channel": record["channel"],
            "query": record["text"], "steps": [],
            "timings": {"intent_ms": 0, "prefilter_ms": 0, "vaglio_ms": 0, "exec_ms": 0},
        }

    @staticmethod
    @reads("exec_ms", "step", "executor", "version", "ok")
    def _invoked(state: dict[str, Any], record: Record, position: int) -> None:
        line = state["open"].get(record["originator_id"])
        if line is not None:
            line["timings"]["exec_ms"] += record["exec_ms"]
            line["steps"].append({"step": record["step"], "executor": record["executor"], "version": record["version"], "ok": record["ok"]})

    @staticmethod
    @reads("step", "kind")
    def _rejected(state: dict[str, Any], record: Record, position: int) -> None:
        line = state["open"].get(record["originator_id"])
        if line is not None:
            line["steps"].append({"step": record["step"], "refused": record["kind"]})

    @staticmethod
    @reads("step", "decision")
    def _intercepted(state: dict[str, Any], record: Record, position: int) -> None:
        line = state["open"].get(record["originator_id"])
        if line is not None:
            line["steps"].append({"step": record["step"], "refused": record["decision"].get("outcome")})

    @staticmethod
    @reads("text")
    def _answered(state: dict[str, Any], record: Record, position: int) -> Lines:
        return _close(state, record, final_kind="answer", final=record["text"])

    @staticmethod
    @reads("final_kind", "message")
    def _failed(state: dict[str, Any], record: Record, position: int) -> Lines:
        return _close(state, record, final_kind=record["final_kind"], final=record["message"])


    @staticmethod
    @reads("signal", "during")
    def _interrupted(state: dict[str, Any], record: Record, position: int) -> Lines:
        return _close(state, record, final_kind="interrupted", final=f"interrupted by {record['signal']} {record['during']}")

    @staticmethod
    @reads("reason")
    def _abandoned(state: dict[str, Any], record: Record, position: int) -> Lines:
        return _close(state, record, final_kind="abandoned", final=record["reason"])


def _timing(field: str) -> Handler:
    """A handler adding the event's ``field`` (milliseconds) to the open turn's timings."""

    @reads(field)
    def add(state: dict[str, Any], record: Record, position: int) -> None:
        line = state["open"].get(record["originator_id"])
        if line is not None:
            line["timings"][field] += record[field]

    return add


def _close(state: dict[str, Any], record: Record, *, final_kind: str, final: str) -> Lines:
    line = state["open"].pop(record["originator_id"], None)
    if line is None:
        return None
    line.update(final_kind=final_kind, final=final, ended=record["timestamp"])
    return [(line["ts"][:10], line)]
