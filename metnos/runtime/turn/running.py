"""A call that passed its checks runs: a builtin, the scratchpad, or an executor in its sandbox (docs/architecture.md, "A step", 8).

What a run records: the invocation (``StepInvoked`` or ``BuiltinCalled``), the
observation (``ObservationRecorded``, with its spill to the scratchpad when it is
large), and each passing of data from an earlier step (``DataPiped``).
"""

from __future__ import annotations

import time
from typing import Any

from domain.turn import Turn
from metnos.runtime.scheduler.words_model import ROLE as WORDS_ROLE
from metnos.runtime.turn.rules.base import Step
from metnos.runtime.turn.side_call import side_models
from metnos.runtime.step.scratchpad import scratchpad_read, spill
from metnos.runtime.turn.shown import elapsed_ms
from metnos.runtime.turn.summariser import SUMMARISER_PROMPT, summarise
from metnos.settings.llm_tiers import ROLE_TIERS


def run_call(step: Step) -> tuple[dict[str, Any], list[Any]]:
    """Run the call; the observation the model is shown, and the aggregates to commit with the step."""
    if step.kind == "builtin":
        return _run_builtin(step)
    if step.kind == "scratchpad":
        return _read_scratchpad(step)
    return _invoke(step)


def _run_builtin(step: Step) -> tuple[dict[str, Any], list[Any]]:
    # Words of a schedule only the model can read are asked of it as a side call, recorded on the turn.
    models = side_models(step.record, step.loop.ports.ask_llm, round=step.state.round, role=WORDS_ROLE)
    observation, others = step.loop.ports.call_builtin(step.name, step.args, step=step.number, approval=step.approval, models=models)
    step.record(Turn.BuiltinCalled, step=step.number, name=step.name, observation=observation)
    ok = observation.get("ok") is not False
    step.record(Turn.ObservationRecorded, step=step.number, ok=ok, observation=observation, spill={})
    if ok:
        step.state.told[step.number] = (step.name, observation)
    _ran(step, observation, ok, ok)
    return observation, others


def _read_scratchpad(step: Step) -> tuple[dict[str, Any], list[Any]]:
    observation = scratchpad_read(step.state.scratch, step.args)
    ok = observation.get("ok") is not False
    step.record(Turn.ObservationRecorded, step=step.number, ok=ok, observation=observation, spill={})
    _ran(step, observation, ok, ok)
    return observation, []


def _invoke(step: Step) -> tuple[dict[str, Any], list[Any]]:
    loop, state, request, name, number = step.loop, step.state, step.request, step.name, step.number
    args = step.arguments
    pipings = step.resolution.pipings if step.resolution is not None else ()
    started = time.perf_counter()
    result = loop.ports.call_executor(name, args, turn_id=str(step.turn.id), step=number, actor=request.actor, channel=request.channel)
    step.record(Turn.StepInvoked, step=number, invocation_id=result.invocation_id, executor=name, version=result.version,
                digest=result.digest, args_hash=result.args_hash, ok=result.ok, kind=result.kind, exec_ms=elapsed_ms(started))
    # The process may succeed while the executor reports a failure in its answer.
    succeeded = result.ok and result.observation.get("ok") is not False
    state.observations[number] = result.observation
    state.executed[number] = (name, result.version)
    spilled = spill(result.observation, turn_id=str(step.turn.id), step=number, threshold_bytes=loop.settings.scratchpad_threshold_bytes)
    if spilled.spilled:
        state.scratch.put(spilled.scratchpad_id, spilled.payload)
        state.has_scratch = True
    observation = dict(spilled.history_observation)
    if spilled.spilled and loop.online.config.summarise_spills:
        gist = summarise(step.record, loop.ports.ask_llm, round=state.round, tier=ROLE_TIERS["summariser"], request_text=request.text,
                         observation=result.observation, system_prompt=loop.online.config.system_prompt("summariser", SUMMARISER_PROMPT))
        step.record(Turn.SpillSummarised, step=number, scratchpad_id=spilled.scratchpad_id, gist=gist.text,
                    tier=ROLE_TIERS["summariser"], model=gist.model, problem=gist.problem)
        if gist.text is not None:
            observation["gist"] = gist.text
    step.record(Turn.ObservationRecorded, step=number, ok=succeeded, observation=observation, spill=spilled.to_json())
    for piping in pipings:
        src_executor, src_version = state.executed.get(piping.src_step, ("", ""))
        step.record(Turn.DataPiped, src_step=piping.src_step, src_executor=src_executor, src_version=src_version,
                    src_field=piping.src_field, dst_step=number, dst_executor=name, dst_version=result.version,
                    dst_arg=piping.dst_arg, mechanism=piping.mechanism)
    step.result_kind = result.kind
    _ran(step, result.observation, result.ok, succeeded)
    return observation, result.aggregates


def _ran(step: Step, observation: dict[str, Any], ran: bool, succeeded: bool) -> None:
    step.observation, step.ran, step.succeeded = observation, ran, succeeded
    step.state.guards = step.state.guards.record(step.number, step.name, step.arguments, executed=True, succeeded=succeeded,
                                                 proposed=step.args)
