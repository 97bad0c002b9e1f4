"""The checks on a proposed call, in the order seeds/002 gives them (docs/architecture.md, "A step").

Each refusal becomes an observation the model can correct, with a hint.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from domain.turn import Turn
from domain.canonical import canonical_hash
from metnos.mechanisms.failures import InvocationError
from metnos.mechanisms.llm.messages import ToolCall
from metnos.mechanisms.sandbox import autonomy
from metnos.mechanisms.sandbox.policy import path_arguments
from metnos.runtime.turn.rules.dialog import ask_for_target, can_ask
from metnos.runtime.turn.completion import complete_arguments, complete_day, complete_exact_ask, complete_paths, keep_names, without_blank_optionals
from metnos.runtime.step.asked import asks_only_questions
from metnos.runtime.step.catalogue import inline_refs
from metnos.runtime.step.intent import destination
from metnos.runtime.step.errors import TurnError
from metnos.runtime.turn.failures import FailureKind, unknown_executor
from metnos.runtime.turn.conversation import context_text
from metnos.runtime.turn.guards import DUPLICATE_READ, REPEATED_ACTION, targets_of
from metnos.runtime.turn.invented import made_up_arguments, unasked_options
from metnos.runtime.turn.grounding import listing_cut, sorted_top, superlative_order
from metnos.runtime.turn.names import outside_names
from metnos.runtime.turn.kinds import outside_kind, sources, without_sources
from metnos.runtime.turn.offering import actions_offered, offered, takes_what_it_finds
from metnos.runtime.turn.recurrence import recurrences, says_an_end
from metnos.runtime.step.piping import FROM_STEP, Resolution, resolve_args
from metnos.runtime.step.schedule_tools import SCHEDULE_TOOL
from metnos.runtime.turn.remediation import RemediationAction, RemediationContext, plan_remediation
from metnos.runtime.turn.rules.answers import open_asks, went_wrong_after
from metnos.runtime.turn.rules.base import BaseRule, End, Settle, Step, Verdict
from metnos.runtime.turn.turn_state import TurnState
from metnos.runtime.step.shape import NEEDS_DATA_SOURCE, PIPELINE_ALREADY_CLOSED, ShapeStep, UnknownVerbError, compute_state, next_state, open_actions
from metnos.runtime.step.validation import validate_args
from metnos.runtime.step.vaglio import resolve_path
from metnos.settings import i18n


class Guards(BaseRule):
    """The caps (steps, the same executor) and the duplicate read (seeds/002 ch. 10): the call is intercepted."""
    name = "guards"

    def on_call(self, step: Step) -> Verdict | None:
        state, name, args = step.state, step.name, step.args
        decision = state.guards.check(name, args, vectorial=bool(step.te and step.te.entry.vectorial))
        if decision.allowed:
            return None
        observation = decision.observation(done_is_ok=step.loop.online.config.done_is_ok)
        repeated = False
        pending = [] if state.acted or asks_only_questions(step.request.text) else actions_offered(step.loop.catalogue, step.pool)
        if pending and step.loop.online.config.named_action_done:
            # The action the request's verb names, of those offered: "write it to ~/t.md" is no call for a delete.
            pending = open_asks(step.loop, state, step.request.text, step.pool) or pending
        if decision.outcome == DUPLICATE_READ and pending:
            # The request asks for an action none of whose steps ran: that is the next call, not an answer.
            data = decision.previous_steps[-1]
            observation = {**observation, "hint": f"the data is at step {data}: call {' or '.join(pending)} now with "
                                                  f'"from_step": {data} or with the values it holds'}
        if decision.outcome == DUPLICATE_READ:
            key = (name, targets_of(name, args) or frozenset({canonical_hash(args)}))
            repeated = key in state.intercepted
            if repeated and pending and not state.reminded_to_act:
                # Told once of the data, it reads again instead of acting: told once more to act, not to answer.
                state.reminded_to_act = True
                repeated = False
            state.intercepted.add(key)
            state.duplicated[name] = step.number
            # A well-formed call for data the turn holds: as good as that data
            # for an answer after a problem.
            for earlier in decision.previous_steps:
                if isinstance(state.observations.get(earlier), dict):
                    state.went_well(state.observations[earlier])
            # If no usable answer comes after this, the answer is that data.
            state.answer_from = tuple(decision.previous_steps)
            if not state.told_clean_at and (state.problem is None or (
                    step.loop.online.config.held_data_after_failed_step and slipped_aside(state, decision.previous_steps))):
                state.told_clean_at = step.number
        record = decision.to_json()
        if repeated:
            # Told once that the data is there, asked again: the model is
            # looping. The turn ends with the data it already has.
            record = {**record, "outcome": "duplicate_read_repeated", "ends_turn": True}
        step.record(Turn.StepIntercepted, step=step.number, decision=record, observation=observation)
        state.guards = state.guards.record(step.number, name, args, executed=False, succeeded=False)
        if decision.outcome == REPEATED_ACTION:
            state.told[step.number] = (name, observation)
            state.action_repeated = True
        if repeated or decision.outcome == REPEATED_ACTION:
            # The model is looping on data it has, or on an action already done: it is asked
            # once more, for words only (tool_choice "none"), to answer from what was done.
            state.final_only = True
            state.looped = True
            return Settle(observation)
        if decision.ends_turn:
            kind = FailureKind.CAP_STEPS if decision.outcome == "cap_steps" else FailureKind.CAP_SAME_EXECUTOR
            return End(kind, str(step.loop.settings.cap_steps) if kind is FailureKind.CAP_STEPS else name, commit=True)
        return Settle(observation)


def slipped_aside(state: TurnState, held: Sequence[int]) -> bool:
    """What went wrong so far is a side step: none of it is what the request's words ask for, nor a call of
    the executor whose data is held (a read of another file that failed: the data held may not be the file
    asked for), and the request makes no exact ask the held data would answer only whole."""
    failed = set(went_wrong_after(state, 0))
    return (bool(failed) and state.exact is None and not failed & set(state.worded)
            and not failed & {state.executor_of(n) for n in held})


class RepeatedFailure(BaseRule):
    """The very call that failed is proposed again: it is not run. The first
    time the model is told so; the second, it is asked to answer with what
    it has (a small model otherwise repeats it to the step cap)."""
    name = "repeated_failure"

    def on_call(self, step: Step) -> Verdict | None:
        state, key = step.state, step.key
        if key not in state.failed_calls:
            return None
        earlier = state.failed_calls[key]
        if (key in state.refused_until_step and step.loop.online.config.refusal_retried_after_step
                and any(n > earlier for n in state.successes())):
            # Refused for a step the turn had not taken, and a step has worked since (the sort the refusal
            # asked for): the guards judge the call again (the 1.5B sorted, then was barred from the right delete).
            del state.failed_calls[key]
            state.refused_until_step.discard(key)
            state.repeated_failures.discard(key)
            return None
        again = key in state.repeated_failures
        state.repeated_failures.add(key)
        observation = {"ok": False, "error_class": "repeated_failure", "previous_steps": [earlier],
                       "error": f"this exact call already failed at step {earlier} (see its error there)",
                       "hint": f"change the arguments of {step.name} as that error says, call another tool, "
                               "or tell the user plainly what could not be done"}
        decision = {"outcome": "repeated_failure", "message": observation["error"], "previous_steps": [earlier],
                    "ends_turn": False, "answer_now": again}
        step.record(Turn.StepIntercepted, step=step.number, decision=decision, observation=observation)
        state.guards = state.guards.record(step.number, step.name, step.args, executed=False, succeeded=False)
        if again:
            state.final_only = True
            state.looped = True
        return Settle(observation)

    def on_observation(self, step: Step) -> None:
        if step.kind in ("executor", "builtin") and not step.succeeded:
            step.state.failed_calls.setdefault(step.key, step.number)


class ReadableArguments(BaseRule):
    """Arguments that are not one JSON object are sent back once (a second unusable call ends the turn)."""
    name = "readable_arguments"

    def on_call(self, step: Step) -> Verdict | None:
        error = step.call.arguments_error
        if error is None:
            return None
        observation = {"ok": False, "error_class": "invalid_arguments", "error": error,
                       "hint": f"call {step.name} again with its arguments written as one JSON object"}
        return step.reject("arguments", {"message": error}, observation)


class AutonomyLevel(BaseRule):
    """The turn's autonomy level runs nothing it does not offer (read_only: nothing with side effects)."""
    name = "autonomy"

    def on_call(self, step: Step) -> Verdict | None:
        if offered(step.loop.catalogue, step.request.autonomy, step.name):
            return None
        return step.reject("autonomy", {"autonomy": step.request.autonomy}, autonomy.refusal(step.request.autonomy, step.name))


class KnownExecutor(BaseRule):
    """The executor exists and is active; the mnestome may offer a chain of existing ones (seeds/002 ch. 11.1.1)."""
    name = "known_executor"

    def on_call(self, step: Step) -> Verdict | None:
        # The pool is what the model was shown first; any active executor of the
        # catalogue may still be called by name.
        if step.kind != "executor" or step.te is not None:
            return None
        catalogue, state = step.loop.catalogue, step.state
        observation = unknown_executor(step.name, sorted(catalogue.executors))
        observation["hint"] = "call one of the available executors, by its exact name"
        synt = step.loop.ports.mnest_suggest(step.name, step.args, dict(state.executed), step.number)
        if synt is not None:
            observation["synt"] = synt
        return step.reject("unknown_executor", {"executor": step.name}, observation)


class PipelineShape(BaseRule):
    """The pipeline shape ``E+ (F|A)?`` (metnos/runtime/step/shape.py), with the remediation registry
    (seeds/002 ch. 4-ter): a call that lacks its data source runs the source first, then is retried."""
    name = "pipeline_shape"

    def on_call(self, step: Step) -> Verdict | None:
        if step.kind != "executor":
            return None
        state, name, args = step.state, step.name, step.args
        try:
            named = frozenset(actions_offered(step.loop.catalogue, step.pool))
            step.transition = next_state(compute_state(state.shape, named_actions=named), name, args,
                                         open_actions=open_actions(state.shape, named))
        except UnknownVerbError as e:
            return step.reject("shape", {"error_class": "unknown_verb", "message": str(e)},
                               {"ok": False, "error_class": "unknown_verb", "error": str(e)})
        error_class = step.transition.error_class
        if error_class is None:
            return None
        action = plan_remediation(RemediationContext(
            error_class=error_class, executor=name, args=args, request_text=step.request.text,
            catalogue=frozenset(step.loop.catalogue.executors),
        ))
        observation = {"ok": False, "error_class": error_class, "error": action.message,
                       "remediation": action.to_json(), "hint": shape_hint(error_class, name)}
        if action.kind == "dialog" and can_ask(step):
            # The target is asked of the user (get_inputs), never made up; answered, the call goes on.
            return ask_for_target(step, action, observation)
        verdict = step.reject("shape", step.transition.to_json(), observation, action.to_json())
        if action.kind == "force_final_answer":
            state.final_only = state.pipeline_closed = True
        elif action.kind == "dialog":
            return End(FailureKind.NEEDS_INPUTS, i18n.english("turn.needs_target", name=name), commit=True)
        elif action.kind == "prereq_then_retry" and not state.remediating:
            return remediate(step, action)
        return verdict

    def on_observation(self, step: Step) -> None:
        if step.kind == "executor":
            step.state.shape.append(ShapeStep(step.name, step.arguments, succeeded=step.succeeded))


def remediate(step: Step, action: RemediationAction) -> Verdict:
    """Run the prerequisite as a step of its own, then retry the refused call
    once with the prerequisite's list (seeds/002 ch. 4-ter). Both are steps
    like any other: checked, judged, recorded."""
    assert action.prereq_tool is not None
    loop, state, call = step.loop, step.state, step.call
    state.remediating = True
    try:
        loop.commit(step.turn)
        state.step += 1
        prereq = ToolCall(id=f"{call.id}~prereq", name=action.prereq_tool, arguments=dict(action.prereq_args))
        prereq_observation, others = loop.step(step.turn, state, step.request, step.pool, prereq, "remediation")
        loop.commit(step.turn, *others)
        prereq_step = state.step
        if prereq_observation.get("ok") is False:
            return Settle({"ok": False, "error_class": NEEDS_DATA_SOURCE,
                           "error": f"{call.name} had no data; {action.prereq_tool} was run to provide it (step {prereq_step}) and failed",
                           "prerequisite": {"step": prereq_step, "observation": prereq_observation},
                           "hint": shape_hint(NEEDS_DATA_SOURCE, call.name)})
        state.step += 1
        retry_args = {k: v for k, v in call.arguments.items() if k not in ("entries", FROM_STEP)}
        retry_args[FROM_STEP] = prereq_step
        retry = ToolCall(id=f"{call.id}~retry", name=call.name, arguments=retry_args)
        observation, others = loop.step(step.turn, state, step.request, step.pool, retry, "remediation")
        if observation.get("ok") is not False and state.problem is not None and state.problem[0] is FailureKind.NEEDS_INPUTS:
            state.problem, state.since_problem = None, []
        remediated = {"prerequisite": {"executor": action.prereq_tool, "step": prereq_step}, "retried_as_step": state.step}
        return Settle({**observation, "remediated": remediated}, tuple(others))
    finally:
        state.remediating = False


def shape_hint(error_class: str, name: str) -> str:
    if error_class == NEEDS_DATA_SOURCE:
        return (f"{name} works on a list from an earlier step: first call a source (read_files for a named file, "
                "find_files for a folder, get_urls for a page), then call it again with from_step set to that step")
    if error_class == PIPELINE_ALREADY_CLOSED:
        return "the work is done: answer the user in plain text"
    return "a request with a target (which files, which items) is needed"


class StepReferences(BaseRule):
    """``from_step`` and ``{{stepN.field}}`` resolved against earlier steps that succeeded (seeds/002 ch. 7)."""
    name = "step_references"

    def on_call(self, step: Step) -> Verdict | None:
        if step.kind != "executor":
            return None
        try:
            step.resolution = resolve_args(step.args, step.state.observations, current_step=step.number, rows=step.name.endswith("_entries"))
        except TurnError as e:
            return step.reject("piping", {"code": e.code, "message": e.message},
                               {"ok": False, "error_class": e.code, "error": e.message, "hint": piping_hint(step)})
        return None


def piping_hint(step: Step) -> str:
    """What a step may refer to, with the numbers it may use: the 1.5B gave
    "from_step": 0 for the list of the step before, and, told only the rule,
    read the files again and sent the same 0."""
    state = step.state
    lists = [f"{s} ({state.executed[s][0]})" for s in state.successes()
             if s in state.executed and isinstance(state.observations[s].get("entries"), list)]
    hint = "refer only to earlier steps that succeeded: from_step N for a list, {{stepN.field}} as a whole value"
    return hint + (f"; the steps with a list: {', '.join(lists)}" if lists else "")


class ArgumentSchema(BaseRule):
    """The arguments against the executor's schema, after what the request says is filled in
    (metnos/runtime/turn/completion.py) and blank optionals are dropped."""
    name = "argument_schema"

    def on_call(self, step: Step) -> Verdict | None:
        if step.kind != "executor":
            return None
        te, text = step.te, step.request.text
        resolution = step.resolution if step.resolution is not None else _unresolved(step.args)
        completed_args, completed = complete_arguments(resolution.args, te.tool.parameters.get("properties", {}),
                                                       resolution.args.get("entries"), text)
        completed_args, paths_completed = complete_paths(completed_args, path_arguments(completed_args, te.loaded.input_schema), text)
        completed.update(paths_completed)
        completed_args, asked_exactly = complete_exact_ask(completed_args, te.tool.parameters.get("properties", {}), step.state.exact)
        completed.update(asked_exactly)
        if step.loop.online.config.day_from_request and not te.entry.side_effects:
            completed_args, day = complete_day(completed_args, te.tool.parameters.get("properties", {}), text)
            completed.update(day)
        completed_args, kept = keep_names(completed_args, te.loaded.input_schema, text)
        if kept:
            completed["kept_name"] = kept
        if completed:
            resolution = dataclasses.replace(resolution, args=completed_args)
        problems = validate_args(te.loaded.input_schema, resolution.args)
        if problems:
            trimmed, dropped = without_blank_optionals(resolution.args, te.loaded.input_schema, problems)
            if dropped and not validate_args(te.loaded.input_schema, trimmed):
                resolution, problems = dataclasses.replace(resolution, args=trimmed), []
                completed["dropped"] = dropped
        # What an earlier rule completed (a target the user gave) stays said.
        step.resolution, step.completed = resolution, {**step.completed, **completed}
        if not problems:
            return None
        required = te.tool.parameters.get("required", [])
        hint = f"call {step.name} again with arguments that fit its schema" + (f" (required: {', '.join(required)})" if required else "")
        return step.reject("schema", {"errors": problems},
                           {"ok": False, "error_class": "schema_violation", "errors": problems, "hint": hint})


class MadeUpValues(BaseRule):
    """A call before any step ran that gives required values and takes none of them from the request,
    the conversation it continues or the user's answers to the turn's questions
    (metnos/runtime/turn/invented.py) is not run: offered tools none of which serves the request,
    the small models call one with values of their own. The call is intercepted and the turn is
    asked for words (the next round offers no call)."""
    name = "made_up_values"

    def on_call(self, step: Step) -> Verdict | None:
        state = step.state
        if step.kind != "executor" or step.te is None or state.observations or state.executed or state.plan is not None:
            return None
        known = _known(step)
        # The signed schema, whole: the one offered to the model keeps only the shape (no default, format, x-program).
        schema = step.te.loaded.input_schema
        made_up = made_up_arguments(step.args, inline_refs(copy.deepcopy(schema), schema), known)
        if not made_up:
            return None
        observation = {"ok": False, "error_class": "made_up_values",
                       "error": f"not run: the request gives none of the values of {', '.join(made_up)}",
                       "hint": "no tool was run; answer in words, and say which values the request would need to give"}
        decision = {"outcome": "made_up_values", "message": observation["error"], "arguments": list(made_up), "ends_turn": False,
                    "answer_now": True}
        step.record(Turn.StepIntercepted, step=step.number, decision=decision, observation=observation)
        state.guards = state.guards.record(step.number, step.name, step.args, executed=False, succeeded=False)
        state.final_only = True
        return Settle(observation)


class UnaskedOptions(BaseRule):
    """A call before any step ran keeps none of the optional values the model wrote as words of its own
    (metnos/runtime/turn/invented.py): a filter the request never gave (a sender nobody named, words an
    event must hold) narrows or shifts the result unasked. They are left out, the tool's default
    holds, and the step's record names them (``completed["unasked"]``)."""
    name = "unasked_options"

    def on_call(self, step: Step) -> Verdict | None:
        state = step.state
        if (step.kind != "executor" or step.te is None or state.observations or state.executed or state.plan is not None
                or not step.loop.online.config.unasked_options):
            return None
        schema = step.te.loaded.input_schema
        # What the user configured (a channel, an account, a source) is theirs, not the model's invention.
        configured = " ".join(_configured_words(step.loop.catalogue.config))
        unasked = unasked_options(step.args, inline_refs(copy.deepcopy(schema), schema), f"{_known(step)}\n{configured}")
        resolution = step.resolution or _unresolved(step.args)
        # A value the completion replaced came from the request, not from the model.
        unasked = tuple(key for key in unasked if resolution.args.get(key) == step.args[key])
        if not unasked:
            return None
        trimmed = {k: v for k, v in resolution.args.items() if k not in unasked}
        if validate_args(schema, trimmed):
            return None
        step.resolution = dataclasses.replace(resolution, args=trimmed)
        step.completed = {**step.completed, "unasked": list(unasked)}
        return None


class UnaskedEnd(BaseRule):
    """A schedule stops only where the request says it does: an expiry, or a number of firings for a
    request that asks for a recurrence, that the request gives no end for is left out, and the schedule
    runs until it is cancelled (the 1.5B gave "every Monday at 9" an expiry in the year 1000, the 0.5B
    ``count: 1`` and an expiry already past). The step's record names what was left out."""
    name = "unasked_end"

    def on_call(self, step: Step) -> Verdict | None:
        if step.name != SCHEDULE_TOOL or not step.loop.online.config.unasked_end:
            return None
        known = _known(step)
        if says_an_end(known):
            return None
        count = step.args.get("count")
        unasked = [key for key, left_out in (("expiry", step.args.get("expiry") is not None),
                                             ("count", count is not None and (count != 1 or bool(recurrences(known)))))
                   if left_out]
        if not unasked:
            return None
        step.args = {k: v for k, v in step.args.items() if k not in unasked}
        step.record(Turn.StepResolved, step=step.number, args=step.args, pipings=[], completed={"unasked": unasked})
        return None


def _configured_words(config: Any) -> list[str]:
    """The names and the words of the executors' configuration: its tables' keys and its strings."""
    if isinstance(config, Mapping):
        return [w for key, value in config.items() for w in (str(key), *_configured_words(value))]
    if isinstance(config, (list, tuple)):
        return [w for value in config for w in _configured_words(value)]
    return [config] if isinstance(config, str) else []


def _known(step: Step) -> str:
    """What a first call's values may come from: the request, the conversation it continues, the user's answers."""
    return "\n".join(t for t in (step.request.text, context_text(step.request.conversation), *step.state.user_answers) if t)


class RequestedKind(BaseRule):
    """A move or a delete takes only files of the kind the request names (metnos/runtime/turn/kinds.py):
    the others are taken out of the call (its ``completed`` says which); a call left with none of the
    kind is refused before it runs. The 1.5B gave the files and their folder, which would have moved
    the folder's other files, and sent the same call again when it was refused whole."""
    name = "requested_kind"

    def on_call(self, step: Step) -> Verdict | None:
        if step.kind != "executor" or not takes_what_it_finds(step.name):
            return None
        kinds, outside = outside_kind(step.request.text, step.arguments)
        named = ", ".join(sorted(kinds))
        return _narrowed_or_refused(step, outside, "kind", "outside_kind", {"kinds": sorted(kinds)}, f"the request names files of kind {named}",
                                    f"the files of kind {named}", "(find them first with a pattern if they are not listed yet)")


class RequestedNames(BaseRule):
    """A move or a delete takes only the files whose names meet what the request says of them
    (metnos/runtime/turn/names.py: "whose name starts with draft_"): the others are taken out of the
    call (its ``completed`` says which); a call left with none of them is refused before it runs. The
    1.5B listed a folder and moved every file in it, one the request had left out among them, and
    answered that it had moved what was asked."""
    name = "requested_names"

    def on_call(self, step: Step) -> Verdict | None:
        if (step.kind != "executor" or not takes_what_it_finds(step.name)
                or not step.loop.online.config.name_conditions):
            return None
        conditions, outside = outside_names(step.request.text, step.arguments)
        named = " and ".join(c.words() for c in conditions)
        return _narrowed_or_refused(step, outside, "names", "outside_name", {"conditions": [c.words() for c in conditions]},
                                    f"the request asks for the files {named}", f"the files {named}",
                                    "(find them first if they are not listed yet)")


class RequestedDestination(BaseRule):
    """A move goes where the request says ("... into ~/photos/2024"): a call that puts a file anywhere
    else is refused before it runs, saying where it should go. The 0.5B moved the photos the request
    named somewhere else, and the turn said answered. It comes after the sandbox's policy: a place
    outside the fence is the fence's to refuse."""
    name = "requested_destination"

    def on_call(self, step: Step) -> Verdict | None:
        if (step.kind != "executor" or step.name.split("_", 1)[0] != "move"
                or not step.loop.online.config.requested_destination):
            return None
        folder = destination(step.request.text)
        if folder is None:
            return None
        policy, args = step.loop.policy, step.arguments
        wanted = resolve_path(folder, policy)
        elsewhere = [m["dst"] for m in args.get("moves") or []
                     if isinstance(m, Mapping) and isinstance(m.get("dst"), str) and not resolve_path(m["dst"], policy).startswith(wanted + "/")]
        given = args.get("dest_dir")
        if isinstance(given, str) and not (resolve_path(given, policy) + "/").startswith(wanted + "/"):
            elsewhere.append(given)
        if not elsewhere:
            return None
        shown = ", ".join(elsewhere[:5]) + (f" and {len(elsewhere) - 5} more" if len(elsewhere) > 5 else "")
        return step.reject("destination", {"destination": folder, "elsewhere": elsewhere[:20]}, {
            "ok": False, "error_class": "outside_request",
            "error": f"the request asks to move them into {folder}; the call puts them at {shown}",
            "hint": f'call {step.name} again with the files as "paths" and "dest_dir": "{folder}"'})


def _narrowed_or_refused(step: Step, outside: list[str], kind: str, completed: str, detail: dict[str, Any], asked: str,
                         wanted: str, how: str) -> Verdict | None:
    """The call without the ``outside`` sources (``completed[completed]`` names them), or, when
    none of its sources is left, refused before it runs with what the request ``asked``."""
    if not outside:
        return None
    narrowed = without_sources(step.arguments, outside)
    if sources(narrowed) and not validate_args(step.te.loaded.input_schema, narrowed):
        step.resolution = dataclasses.replace(step.resolution or _unresolved(step.args), args=narrowed)
        step.completed = {**step.completed, completed: outside[:20]}
        return None
    shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
    error = f"{asked}; {len(outside)} of the files given are not: {shown}"
    return step.reject(kind, {**detail, "outside": outside[:20]}, {
        "ok": False, "error_class": "outside_request", "error": error,
        "hint": f"call {step.name} again with {wanted} themselves, not their folder {how}"})


class RequestedTop(BaseRule):
    """A move or a delete of "the largest file" takes the top of a sort (the 1.5B listed a folder and
    deleted the first file it saw as "the largest"): without a sort, or outside its top, it is refused
    before it runs, unless no list the steps gave holds more than were asked for."""
    name = "requested_top"

    def on_call(self, step: Step) -> Verdict | None:
        state, ask = step.state, step.state.exact
        if step.kind != "executor" or ask is None or ask.end != "top" or not takes_what_it_finds(step.name):
            return None
        given = sources(step.arguments)
        if not given:
            return None
        count, home = ask.count or 1, step.loop.shown_home
        lists = {n: state.observations[n]["entries"] for n in state.successes() if isinstance(state.observations[n].get("entries"), list)}
        sorts = [n for n in lists if state.executor_of(n).startswith("sort_")]
        listings = {n: found for n, found in lists.items() if n not in sorts}
        if listings and all(listing_cut(state.observations[n]) for n in listings):
            # find_files with max_results 1 gives the first file found, not the largest.
            cut = max(listings)
            return self._refuse(step, ask, f"the request asks for {ask.words()}, and step {cut} listed only the first "
                                           f"{len(listings[cut])} (its list was cut short)",
                                f"list them all again without max_results, sort them, then call {step.name} with the top {count}")
        if not sorts:
            if lists and all(len(found) <= count for found in lists.values()):
                return None
            listed = max(lists, default=None)
            how = f"sort_entries with from_step {listed}" if listed is not None else "find the files, then sort_entries"
            return self._refuse(step, ask, f"the request asks for {ask.words()}, and no step sorted the files to find them",
                                f"call {how} first (by the field the request names), then {step.name} with its top {count}")
        whole = max(listings, key=lambda n: (len(listings[n]), n), default=None)
        sorted_in = _count_in(state.observations[sorts[-1]])
        if whole is not None and sorted_in is not None and sorted_in < len(listings[whole]):
            return self._refuse(step, ask, f"the request asks for {ask.words()}: the sort at step {sorts[-1]} ordered "
                                           f"{sorted_in} of the {len(listings[whole])} files step {whole} found",
                                f"call sort_entries with from_step {whole}, then {step.name} with its top {count}")
        top = sorted_top(state.observations[sorts[-1]], count, superlative_order(step.request.text))
        kept = {_absolute(e["path"], home) for e in top if isinstance(e, dict) and isinstance(e.get("path"), str)}
        outside = [g for g in given if _absolute(g, home) not in kept]
        if not outside:
            return None
        return self._refuse(step, ask, f"the request asks for {ask.words()}: the top of the sort at step {sorts[-1]} is "
                                       f"{', '.join(sorted(kept)) or 'empty'}, and {', '.join(outside[:5])} is not among it",
                            f"call {step.name} again with the top {count} of step {sorts[-1]} only")

    @staticmethod
    def _refuse(step: Step, ask: Any, error: str, hint: str) -> Verdict:
        return step.reject("top", {"asked": ask.words(), "message": error},
                           {"ok": False, "error_class": "outside_request", "error": error, "hint": hint})


class AppendOnce(BaseRule):
    """An append whose text begins with all that a file held when the turn read it would write that
    text again after itself: asked to add one item to a list, the 1.5B appended the whole list with the
    item at its end. What the file already holds is taken out of the append (``completed["appended_only_new"]``
    names the files), so the file ends as the model wrote it. Only a whole read of the file in this turn,
    with no write to it since, counts."""
    name = "append_once"

    def on_call(self, step: Step) -> Verdict | None:
        files = step.arguments.get("files") if step.kind == "executor" else None
        if not isinstance(files, list) or not any(isinstance(f, Mapping) and f.get("mode") == "append" for f in files):
            return None
        home = step.loop.shown_home
        held = _contents_read(step.state, home)
        trimmed, names = list(files), []
        for i, f in enumerate(files):
            if not (isinstance(f, Mapping) and f.get("mode") == "append" and isinstance(f.get("path"), str)
                    and isinstance(f.get("content"), str)):
                continue
            before = held.get(_absolute(f["path"], home))
            if before and before.strip() and f["content"].startswith(before) and f["content"][len(before):].strip():
                trimmed[i], names = {**f, "content": f["content"][len(before):]}, [*names, f["path"]]
        if not names:
            return None
        step.resolution = dataclasses.replace(step.resolution or _unresolved(step.args), args={**step.arguments, "files": trimmed})
        step.completed = {**step.completed, "appended_only_new": names}
        return None


def _contents_read(state: Any, home: str) -> dict[str, str]:
    """Each file's text as a whole read of this turn returned it, for the files no step wrote since."""
    held: dict[str, str] = {}
    for number in state.successes():
        observation = state.observations.get(number)
        entries = observation.get("entries") if isinstance(observation, Mapping) else None
        for entry in entries if isinstance(entries, list) else ():
            if (isinstance(entry, Mapping) and isinstance(entry.get("path"), str) and isinstance(entry.get("content"), str)
                    and entry.get("truncated") is not True and not entry.get("error")):
                held[_absolute(entry["path"], home)] = entry["content"]
    written = {_absolute(f["path"], home) for s in state.shape if s.succeeded
               for f in (s.args.get("files") if isinstance(s.args.get("files"), list) else ())
               if isinstance(f, Mapping) and isinstance(f.get("path"), str)}
    return {path: text for path, text in held.items() if path not in written}


def _count_in(observation: Mapping[str, Any]) -> int | None:
    meta = observation.get("metadata")
    found = meta.get("count_in") if isinstance(meta, Mapping) else None
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def _absolute(path: str, home: str) -> str:
    return (home.rstrip("/") + path[1:]) if home and (path == "~" or path.startswith("~/")) else path


class SandboxPolicy(BaseRule):
    """Every path and host argument against the grants the executor's manifest declares."""
    name = "sandbox_policy"

    def on_call(self, step: Step) -> Verdict | None:
        check = step.loop.check_policy
        if step.kind != "executor" or check is None:
            return None
        try:
            check(step.te.loaded, step.arguments)
        except InvocationError as e:
            details = e.details()
            return step.reject("policy", details, {
                "ok": False, "error_class": "policy_violation", "error": details,
                "hint": f"{step.name} may only touch what its manifest declares: use a path or host inside that scope (a path in "
                        "the user's home is written ~/..., as the request writes it), or tell the user it is out of reach"})
        return None


def _unresolved(args: dict[str, Any]) -> Resolution:
    return Resolution(args=dict(args), pipings=())
