"""The daily audit lines of seeds/000 ch. 9, folded from invocation events.

One JSONL file a day under the workspace's .audit/executors/. Lines are only
ever appended; the sizes the files had at the last recorded position are kept
with that position, so that after a crash between appending and recording,
the next catch-up first cuts the files back and nothing is written twice.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from eventsourcing.persistence import Tracking

from domain.invocation import Invocation
from projections.base import UPSTREAM, Fold
from projections.store import ViewStore


class AuditFold(Fold):
    """State: the requests still waiting for their outcome, and the file sizes."""

    name = "audit"
    version = 1
    events = (Invocation.InvocationRequested, Invocation.InvocationRefused, Invocation.InvocationCompleted)

    def initial(self) -> dict[str, Any]:
        return {"open": {}, "sizes": {}}

    def apply(self, state: dict[str, Any], event: Any, position: int) -> None:
        # Lines are produced by ``lines_for``; the fold only tracks requests.
        key = str(event.originator_id)
        if isinstance(event, Invocation.InvocationRequested):
            state["open"][key] = {
                "ts": event.timestamp.isoformat(),
                "trace_id": event.trace_id,
                "turn_id": event.turn_id,
                "executor": event.executor,
                "version": event.version,
                "caller": event.caller,
                "input": event.args,
            }
        else:
            state["open"].pop(key, None)


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


class AuditLines:
    """Materialises AuditFold into the day files."""

    def __init__(self, audit_dir: Path, store: ViewStore) -> None:
        self.dir = audit_dir / "executors"
        self.store = store
        self.fold = AuditFold()

    def _state(self) -> dict[str, Any]:
        raw = self.store.get_state(self.fold.name)
        return self.fold.initial() if raw is None else orjson.loads(raw)

    def catch_up(self, log: Any) -> int:
        state = self._state()
        self._cut_back(state["sizes"])
        last = self.store.max_tracking_id(UPSTREAM) or 0
        written = 0
        handles: dict[str, Any] = {}
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            for nid, event in log.domain_events(last + 1, topics=self.fold.topics):
                request = state["open"].get(str(event.originator_id))
                self.fold.apply(state, event, nid)
                if request is None or isinstance(event, Invocation.InvocationRequested):
                    continue
                line = audit_line(request, event)
                day = request["ts"][:10]
                handle = handles.get(day)
                if handle is None:
                    handle = handles[day] = open(self.dir / f"{day}.jsonl", "ab")  # noqa: SIM115
                handle.write(orjson.dumps(line, option=orjson.OPT_SORT_KEYS) + b"\n")
                written += 1
        finally:
            for day, handle in handles.items():
                handle.flush()
                os.fsync(handle.fileno())
                handle.close()
                state["sizes"][day] = (self.dir / f"{day}.jsonl").stat().st_size
        head = log.recorder.max_notification_id() or 0
        if head > last:
            from projections.base import encode_state

            self.store.put_state(self.fold.name, self.fold.version, encode_state(state), Tracking(UPSTREAM, head))
        return written

    def _cut_back(self, sizes: dict[str, int]) -> None:
        if not self.dir.exists():
            return
        for path in self.dir.glob("*.jsonl"):
            recorded = sizes.get(path.stem, 0)
            if path.stat().st_size > recorded:
                with open(path, "r+b") as f:
                    f.truncate(recorded)

    def rebuild(self, log: Any) -> int:
        self.store.reset(self.fold.name)
        if self.dir.exists():
            for path in self.dir.glob("*.jsonl"):
                path.unlink()
        return self.catch_up(log)
