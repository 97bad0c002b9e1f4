"""Scripted turns for the mnestome tests: the Turn events the loop would record.

A step is ``(executor, version, refs)``; ``version=None`` makes it a call to
an executor that does not exist (a ``StepRejected`` of kind
``unknown_executor``). ``refs`` are ``(src_step, field, mechanism)``: with
``from_step`` the argument is ``from_step: N``, with ``template`` it is
``{{stepN.field}}``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import NAMESPACE_URL, uuid5

from domain.turn import Turn

Step = tuple[str, "str | None", list[tuple[int, str, str]]]


def scripted_turn(n: int, at: datetime, text: str, steps: list[Step]) -> tuple[Turn, datetime]:
    """The turn (events pending) and the moment it closed."""
    clock = [at]

    def tick() -> datetime:
        clock[0] += timedelta(milliseconds=10)
        return clock[0]

    turn = Turn.start(id=uuid5(NAMESPACE_URL, f"test-turn-{n}"), at=at, text=text, actor="roberto", channel="cli",
                      mode="normal", settings={}, runtime_version="test")
    for i, (executor, version, refs) in enumerate(steps, start=1):
        args: dict[str, Any] = {}
        for src, field, mechanism in refs:
            if mechanism == "from_step":
                args["from_step"] = src
            else:
                args[f"arg_{field}"] = f"{{{{step{src}.{field}}}}}"
        turn.record(Turn.StepProposed, at=tick(), step=i, call_id=f"c{i}", executor=executor, args=args, call_form="native")
        if version is None:
            turn.record(Turn.StepRejected, at=tick(), step=i, kind="unknown_executor", error={"executor": executor},
                        observation={"ok": False, "error_class": "unknown_executor"}, remediation=None)
            continue
        turn.record(Turn.StepInvoked, at=tick(), step=i, invocation_id=f"inv{n}-{i}", executor=executor, version=version,
                    digest="blake3:x", args_hash="h", ok=True, kind="ok", exec_ms=1)
        for src, field, mechanism in refs:
            src_exec, src_ver = steps[src - 1][0], steps[src - 1][1]
            turn.record(Turn.DataPiped, at=tick(), src_step=src, src_executor=src_exec, src_version=src_ver or "",
                        src_field="entries" if mechanism == "from_step" else field, dst_step=i, dst_executor=executor,
                        dst_version=version, dst_arg="entries" if mechanism == "from_step" else f"arg_{field}",
                        mechanism=mechanism)
    closed = tick()
    turn.record(Turn.TurnAnswered, at=closed, text="done", steps=len(steps))
    return turn, closed
