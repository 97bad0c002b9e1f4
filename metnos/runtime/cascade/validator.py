"""L2: a proposed plan is checked before it runs (seeds/002, "run_turn").

The checks the loop makes on a call, made on the whole plan before its first
step: every executor is in the turn's catalogue, the chain fits the pipeline
shape ``E+ (F|A)?``, the arguments known before the run (those not piped from
an earlier step) fit the executor's schema and its sandbox scope. The loop
checks every step again as it runs it; this guard only keeps a plan that
cannot work from starting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metnos.mechanisms.failures import InvocationError
from metnos.runtime.step.catalogue import TurnCatalogue
from metnos.runtime.step.piping import step_refs_in
from metnos.runtime.step.shape import START, next_state
from metnos.runtime.step.validation import validate_args


def plan_problems(plan: dict[str, Any], catalogue: TurnCatalogue,
                  check_policy: Callable[[Any, dict[str, Any]], None] | None) -> list[str]:
    problems: list[str] = []
    state = START
    for number, step in enumerate(plan["steps"], start=1):
        name, args = step["executor"], step["args"]
        te = catalogue.get(name)
        if te is None:
            problems.append(f"step {number}: {name} is not in the catalogue")
            continue
        transition = next_state(state, name, args)
        if transition.error_class is not None:
            problems.append(f"step {number}: {name} breaks the pipeline shape ({transition.error_class})")
        state = transition.state
        piped = any(k in args for k in ("from_step", "with_step")) or step_refs_in(repr(args))
        if piped:
            continue
        for error in validate_args(te.loaded.input_schema, args):
            problems.append(f"step {number}: {name} arguments off schema: {error.get('message', error)}")
        if check_policy is not None:
            try:
                check_policy(te.loaded, args)
            except InvocationError as e:
                problems.append(f"step {number}: {name} outside its scope: {e.details()}")
    return problems
