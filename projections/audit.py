"""The daily audit lines of seeds/000 ch. 9, folded from invocation events.

One JSONL line per invocation, refused or completed, in
``.audit/executors/YYYY-MM-DD.jsonl`` of the workspace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from domain.invocation import Invocation
from projections.base import Handler, iso, key_of
from projections.daily import DailyLines, Lines, LinesFold
from projections.store import ViewStore


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
            Invocation.InvocationRefused: self._ended,
            Invocation.InvocationCompleted: self._ended,
        }

    @staticmethod
    def _requested(state: dict[str, Any], event: Any, position: int) -> Lines:
        state["open"][key_of(event.originator_id)] = {
            "ts": iso(event.timestamp),
            "trace_id": event.trace_id,
            "turn_id": event.turn_id,
            "executor": event.executor,
            "version": event.version,
            "caller": event.caller,
            "input": event.args,
        }
        return None

    @staticmethod
    def _ended(state: dict[str, Any], event: Any, position: int) -> Lines:
        request = state["open"].pop(key_of(event.originator_id), None)
        if request is None:
            return None
        return [(request["ts"][:10], audit_line(request, event))]


def audit_line(request: dict[str, Any], event: Any) -> dict[str, Any]:
    if isinstance(event, Invocation.InvocationCompleted):
        output = {"size": event.output_size, "sha": event.output_hash}
        duration = event.duration_ms
        exit_kind = "ok" if event.ok else event.kind
    else:
        output = None
        duration = 0
        exit_kind = event.kind
    return {**request, "output": output, "duration_ms": duration, "exit": exit_kind}


def AuditLines(audit_dir: Path, store: ViewStore) -> DailyLines:  # noqa: N802 - a factory that reads as a class
    return DailyLines(audit_dir / "executors", store, AuditFold())
