"""What the mnestome needs out of a finished turn's events.

The loop hands over the Turn aggregate's events in order; this module reads
the request, the steps that ran (executor and version), the data passings,
and the calls to executors that do not exist together with the step
references in their arguments (``from_step``, ``with_step``, ``{{stepN...}}``)
and the composition of existing executors the turn offered instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from domain.turn import Turn
from metnos.runtime.step.piping import LIST_REFERENCES

_REF = re.compile(r"\{\{\s*step(\d+)\.([^{}\s]*)\s*\}\}")


@dataclass
class TurnFacts:
    turn_id: str | None = None
    text: str = ""
    channel: str = ""
    invoked: dict[int, tuple[str, str]] = field(default_factory=dict)
    proposed: dict[int, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    piped: list[Any] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)
    # step of a call to a missing executor -> the chain of existing ones offered instead (synt compose)
    composed: dict[int, dict[str, Any]] = field(default_factory=dict)


def read_turn(events: Iterable[Any]) -> TurnFacts:
    facts = TurnFacts()
    for e in events:
        if isinstance(e, Turn.TurnStarted):
            facts.turn_id = str(e.originator_id)
            facts.text = e.text
            facts.channel = e.channel
        elif isinstance(e, Turn.StepProposed):
            facts.proposed[e.step] = (e.executor, e.args)
        elif isinstance(e, Turn.StepInvoked):
            if e.ok:
                facts.invoked[e.step] = (e.executor, e.version)
        elif isinstance(e, Turn.DataPiped):
            facts.piped.append(e)
        elif isinstance(e, Turn.StepRejected) and e.kind == "unknown_executor":
            facts.unknown.append(e.step)
            synt = (e.observation or {}).get("synt")
            if isinstance(synt, dict) and synt.get("kind") == "compose":
                facts.composed[e.step] = synt
    return facts


def step_references(args: Any, path: str = "") -> list[tuple[int, str, str]]:
    """(source step, source field, destination argument) for every reference in ``args``."""
    found: list[tuple[int, str, str]] = []
    if isinstance(args, dict):
        for key in sorted(args, key=str):
            value = args[key]
            dst = f"{path}.{key}" if path else str(key)
            list_target = dict(LIST_REFERENCES).get(key) if not path else None
            if list_target is not None:
                step = _as_step(value)
                if step is not None:
                    found.append((step, "entries", list_target))
                    continue
            found.extend(step_references(value, dst))
    elif isinstance(args, list):
        for i, value in enumerate(args):
            found.extend(step_references(value, f"{path}.{i}" if path else str(i)))
    elif isinstance(args, str):
        for m in _REF.finditer(args):
            found.append((int(m.group(1)), m.group(2), path))
    return found


def _as_step(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None
