"""The pipeline shape invariant ``E+ (F | A)?`` (seeds/002 ch. 4-bis).

An executor's class comes from the verb before the first ``_`` of its name
(never from the rest of the name):

* E, producers: read find list get filter sort group classify compute
  compare extract. Of these, filter sort group classify compute compare
  extract *consume* a list, so at the start of a turn they need a source;
  read find list get are sources themselves.
* F, presentation: describe render. Closes the pipeline.
* A, actions: move delete send share write set create change order
  compress. Closes the pipeline.

The system pseudo-verbs (final_answer, undo_last_turn, request_new_executor,
admin, request_disambiguation_from_user) bypass the FSM, and so do the
runtime builtins scratchpad_read, get_inputs and request_location_from_user (meta-operations on data the
turn already has, or a dialog). A verb outside the vocabulary is a
catalogue defect, reported by :class:`UnknownVerbError`, not a shape error.

States: START, CHAIN, TERMINAL. Transitions, with the spec's three error
classes:

* START + source E -> CHAIN.
* START + consumer E, F -> CHAIN / TERMINAL when the call carries a literal
  source, else ``needs_data_source``. A literal source is ``from_step``,
  ``with_step`` or any non-empty list argument (the spec's
  ``has_literal_source``).
* START + A -> TERMINAL when the call names a target, else
  ``needs_action_target``. A target is a literal source or any non-empty
  string argument: ``write_files(path="/tmp/x", content="hi")`` is a
  complete one-step request and must not bounce to a dialog because its
  target is a string rather than a list. This widens the spec's
  list-only reading on purpose.
* CHAIN + E -> CHAIN; CHAIN + F|A -> TERMINAL.
* TERMINAL + anything -> ``pipeline_already_closed``, except one case:
  TERMINAL + A of an *open action*, an action the request names that has
  not succeeded yet in the turn ("delete the old files and then tell a friend
  by message"), starts the next pipeline as START + A would. The seed's
  regex allows one terminator a turn; a request that names two actions asks
  for two pipelines, and closing after the first would drop the second while
  the turn answered as if both were done. Each named action opens once, so
  the FSM still ends: at most one more pipeline per action named.

Only steps that succeeded move the state (:func:`compute_state`): a failed
read produced no data, and a failed write closed nothing, so the LLM may
retry either. On an error the state does not change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from metnos.runtime.step.errors import TurnError

START = "START"
CHAIN = "CHAIN"
TERMINAL = "TERMINAL"
STATES = (START, CHAIN, TERMINAL)

NEEDS_DATA_SOURCE = "needs_data_source"
NEEDS_ACTION_TARGET = "needs_action_target"
PIPELINE_ALREADY_CLOSED = "pipeline_already_closed"
ERROR_CLASSES = (NEEDS_DATA_SOURCE, NEEDS_ACTION_TARGET, PIPELINE_ALREADY_CLOSED)

SOURCE_VERBS = frozenset({"read", "find", "list", "get"})
CONSUMER_VERBS = frozenset({"filter", "sort", "group", "classify", "compute", "compare", "extract"})
E_VERBS = SOURCE_VERBS | CONSUMER_VERBS
F_VERBS = frozenset({"describe", "render"})
A_VERBS = frozenset({"move", "delete", "send", "share", "write", "set", "create", "change",
                     "order", "compress", "run"})
SYSTEM_NAMES = frozenset({"final_answer", "undo_last_turn", "request_new_executor", "admin",
                          "request_disambiguation_from_user", "scratchpad_read", "get_inputs",
                          "request_location_from_user"})


class UnknownVerbError(TurnError):
    pass


def verb_of(name: str) -> str:
    return name.split("_", 1)[0]


def classify(name: str, *, system_names: frozenset[str] = SYSTEM_NAMES) -> str:
    """"E", "F", "A", or "SYSTEM" for the pseudo-verbs that bypass the FSM."""
    if name in system_names:
        return "SYSTEM"
    verb = verb_of(name)
    if verb in E_VERBS:
        return "E"
    if verb in F_VERBS:
        return "F"
    if verb in A_VERBS:
        return "A"
    raise UnknownVerbError("unknown_verb",
                           f"executor {name!r}: verb {verb!r} is not in the closed vocabulary",
                           {"name": name, "verb": verb})


def has_literal_source(args: Mapping[str, Any]) -> bool:
    if "from_step" in args or "with_step" in args:
        return True
    return any(isinstance(v, list) and v for v in args.values())


def has_action_target(args: Mapping[str, Any]) -> bool:
    return has_literal_source(args) or any(isinstance(v, str) and v.strip() for v in args.values())


@dataclass(frozen=True, slots=True)
class Transition:
    state: str  # the state after the step (unchanged on error)
    error_class: str | None
    category: str  # E / F / A / SYSTEM

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "error_class": self.error_class, "category": self.category}


def next_state(state: str, name: str, args: Mapping[str, Any], *,
               system_names: frozenset[str] = SYSTEM_NAMES,
               open_actions: frozenset[str] = frozenset()) -> Transition:
    """``open_actions``: the actions the request names that have not succeeded
    yet in the turn (:func:`open_actions`); one of them may start a new pipeline
    after the last one closed."""
    if state not in STATES:
        raise ValueError(f"unknown pipeline state {state!r}")
    category = classify(name, system_names=system_names)
    if category == "SYSTEM":
        return Transition(state, None, category)
    if state == TERMINAL:
        if category == "A" and name in open_actions:
            return next_state(START, name, args, system_names=system_names)
        return Transition(state, PIPELINE_ALREADY_CLOSED, category)
    if state == CHAIN:
        return Transition(CHAIN if category == "E" else TERMINAL, None, category)
    # START
    if category == "E":
        if verb_of(name) in SOURCE_VERBS or has_literal_source(args):
            return Transition(CHAIN, None, category)
        return Transition(state, NEEDS_DATA_SOURCE, category)
    if category == "F":
        if has_literal_source(args):
            return Transition(TERMINAL, None, category)
        return Transition(state, NEEDS_DATA_SOURCE, category)
    if has_action_target(args):
        return Transition(TERMINAL, None, category)
    return Transition(state, NEEDS_ACTION_TARGET, category)


@dataclass(frozen=True, slots=True)
class ShapeStep:
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    succeeded: bool = True


def compute_state(history: Iterable[ShapeStep], *,
                  system_names: frozenset[str] = SYSTEM_NAMES,
                  named_actions: frozenset[str] = frozenset()) -> str:
    """The state after ``history``. Failed steps and steps the FSM refused
    do not move it. ``named_actions``: the actions the request names."""
    state = START
    done: set[str] = set()
    for step in history:
        if not step.succeeded:
            continue
        t = next_state(state, step.name, step.args, system_names=system_names,
                       open_actions=frozenset(named_actions - done))
        if t.error_class is None:
            state = t.state
            done.add(step.name)
    return state


def open_actions(history: Iterable[ShapeStep], named_actions: frozenset[str]) -> frozenset[str]:
    """The actions the request names that no step of ``history`` has done yet."""
    return frozenset(named_actions - {step.name for step in history if step.succeeded})
