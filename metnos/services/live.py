"""The turn running in the daemon now, as it happens: what the dashboard's turn page shows live, and its Stop.

A turn commits its events in one transaction at its end, or earlier where a
person is about to wait or the world changed (metnos/runtime/turn/loop.py):
the log, and so the event stream, learns of a read-only step only when the
turn ends. The loop hands every event to an observer as it records it;
:class:`LiveTurns` keeps those of each running turn in memory, in order, so
that a page can show each step as it runs, and holds the turn's interrupt
gate, so that a Stop lands at the turn's next safe point. What is kept here
is never the record: the log is, once the turn commits.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from domain.errors import MetnosError
from domain.turn import Turn
from metnos.services.interrupts import InterruptGate

# A field's value is cut to this many characters in the live view (the turn's page shows the whole once recorded).
SHOWN_CHARS = 400
# What an event's fields hold that the page need not repeat.
_UNSHOWN = frozenset({"originator_id", "originator_version", "timestamp"})


class TurnNotRunning(MetnosError):
    """The turn asked for is not running in this daemon (it ended, or runs in another process)."""


@dataclass
class _Running:
    gate: InterruptGate
    request: str
    channel: str
    started: str
    events: list[dict[str, Any]] = field(default_factory=list)
    stopped_by: str | None = None


class LiveTurns:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}

    def observer(self, gate: InterruptGate, then: Callable[[Any], None] | None = None) -> Callable[[Any], None]:
        """An observer for the loop: the turn's events as they are recorded, under its id from TurnStarted on."""
        turn_id: list[str] = []

        def observe(event: Any) -> None:
            if isinstance(event, Turn.TurnStarted):
                turn_id.append(str(event.originator_id))
                with self._lock:
                    self._running[turn_id[0]] = _Running(gate, event.text, event.channel, str(event.timestamp)[:19])
            if turn_id:
                shown = shown_event(event)
                with self._lock:
                    running = self._running.get(turn_id[0])
                    if running is not None:
                        running.events.append(shown)
            if then is not None:
                then(event)

        observe.turn_ids = turn_id  # type: ignore[attr-defined]
        return observe

    def ended(self, observe: Callable[[Any], None]) -> None:
        for turn_id in getattr(observe, "turn_ids", []):
            with self._lock:
                self._running.pop(turn_id, None)

    def events(self, turn_id: str, after: int = 0) -> dict[str, Any]:
        """The running turn's events from index ``after`` on; ``running`` False once it ended (or never ran here)."""
        with self._lock:
            running = self._running.get(turn_id)
            if running is None:
                return {"turn_id": turn_id, "running": False, "events": [], "next": after}
            shown = running.events[after:]
            return {"turn_id": turn_id, "running": True, "events": shown, "next": after + len(shown),
                    "stopping": running.stopped_by is not None}

    def running(self) -> list[dict[str, Any]]:
        """The turns running here now: id, request, channel, start (UTC), steps proposed so far."""
        with self._lock:
            return [{"id": turn_id, "text": r.request, "channel": r.channel, "started": r.started, "status": "running",
                     "steps": sum(1 for e in r.events if e["type"] == "StepProposed"), "stopping": r.stopped_by is not None}
                    for turn_id, r in self._running.items()]

    def find(self, prefix: str) -> str | None:
        """The id of the running turn that starts with ``prefix`` (None: none, or more than one)."""
        with self._lock:
            found = [t for t in self._running if t.startswith(prefix)]
        return found[0] if len(found) == 1 else None

    def stop(self, turn_id: str, by: str) -> None:
        """Stop the turn at its next safe point (recorded as interrupted by ``by``)."""
        with self._lock:
            running = self._running.get(turn_id)
            if running is None:
                raise TurnNotRunning(f"turn {turn_id} is not running in this daemon (it has ended, or runs in "
                                     "another process: stop that one with Ctrl-C where it runs)")
            running.stopped_by = by
            running.gate.stop_at_next_checkpoint(signal.SIGINT, by)


def shown_event(event: Any) -> dict[str, Any]:
    """An event as the live view shows it: its type and its fields, each cut short."""
    fields = {}
    for key, value in vars(event).items():
        if key in _UNSHOWN or key.startswith("_"):
            continue
        text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        fields[key] = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
    return {"type": type(event).__name__, "at": str(getattr(event, "timestamp", ""))[11:23], "fields": fields}
