"""The daily audit lines of seeds/000 ch. 9, folded from invocation events.

One JSONL line per invocation, refused or completed, in
``.audit/executors/YYYY-MM-DD.jsonl`` of the workspace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from domain.invocation import Invocation
from metnos.mechanisms.store.event_record import Record
from projections.base import Handler, reads
from projections.daily import DailyLines, Lines, LinesFold
from metnos.mechanisms.store.views import ViewStore


class AuditFold(LinesFold):
    """State: the requests still waiting for their outcome."""

    name = "audit"
    version = 1
    cost = 2

    def initial(self) -> dict[str, Any]:
        return {"open": {}}

    def handlers(self) -> dict[type, Handler]:
        return {
            Invocation.InvocationRequested: self._requested,
            Invocation.InvocationRefused: self._refused,
            Invocation.InvocationCompleted: self._completed,
        }

    @staticmethod
    @reads("trace_id", "turn_id", "executor", "version", "caller", "args")
    def _requested(state: dict[str, Any], record: Record, position: int) -> Lines:
        state["open"][record["originator_id"]] = {
            "ts": record["timestamp"],
            "trace_id": record["trace_id"],
            "turn_id": record["turn_id"],
            "executor": record["executor"],
            "version": record["version"],
            "caller": record["caller"],
            "input": record["args"],
        }
        return None

    @staticmethod
    @reads("output_size", "output_hash", "duration_ms", "ok", "kind")
    def _completed(state: dict[str, Any], record: Record, position: int) -> Lines:
        request = state["open"].pop(record["originator_id"], None)
        if request is None:
            return None
        outcome = {
            "output": {"size": record["output_size"], "sha": record["output_hash"]},
            "duration_ms": record["duration_ms"],
            "exit": "ok" if record["ok"] else record["kind"],
        }
        return [(request["ts"][:10], {**request, **outcome})]

    @staticmethod
    @reads("kind")
    def _refused(state: dict[str, Any], record: Record, position: int) -> Lines:
        request = state["open"].pop(record["originator_id"], None)
        if request is None:
            return None
        return [(request["ts"][:10], {**request, "output": None, "duration_ms": 0, "exit": record["kind"]})]


def AuditLines(audit_dir: Path, store: ViewStore) -> DailyLines:  # noqa: N802 - a factory that reads as a class
    return DailyLines(audit_dir / "executors", store, AuditFold())
