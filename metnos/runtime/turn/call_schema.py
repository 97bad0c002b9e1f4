"""The calls a planner round accepts, as one JSON Schema (issue 32, item 1).

Built each round from the tools offered that round and the steps run so far,
it admits exactly a ``{"name": ..., "arguments": {...}}`` object that calls one
offered tool with arguments of its schema, where:

* ``from_step``/``with_step`` name an earlier step that succeeded with a list
  (piping.py resolves only those); before any such step the argument is not
  offered at all, as in the first round (catalogue.tool_parameters);
* any other argument may instead be a whole ``{{stepN.field}}`` reference to a
  field an earlier step that succeeded really holds (piping.py's "sole value"
  rule; the 1.5B wrote ``{{step2.text}}`` for a step whose text was in its entries);
* a path argument (named as the sandbox policy names paths, not opaque data, and
  with no pattern of its own) is written in a form the policy accepts: ``~``,
  ``~/...`` or absolute, and no glob; an argument's own pattern is kept;
* any other text holds no ``{{`` at all: piping refuses a reference inside a
  longer text and a ``{{name.field}}`` that names no step, and the 0.5B wrote
  ``{{from_step.content}}`` (a text that truly needs ``{{`` cannot be written
  under the grammar; the unconstrained path still takes it);
* no argument the tool does not offer.

The online mode's one-call plan gets the same arguments over its own step
numbers, each step referring only to the steps before it (``plan_constraint``).

What the schema cannot say (whether a referenced field exists, whether a path is
inside a grant) the loop still checks after the call, as before.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from metnos.mechanisms.llm.constraint import CallConstraint, JsonConstraint
from metnos.mechanisms.llm.messages import ToolSpec
from metnos.mechanisms.sandbox.policy import is_path_argument
from metnos.runtime.step.piping import LIST_REFERENCES, PipingError, list_field_of
from metnos.runtime.step.schedule_tools import SCHEDULED_CALLS
from metnos.runtime.step.catalogue import OPAQUE_KEY, SCRATCHPAD_READ as SCRATCHPAD

# The forms check_path accepts ("~", "~/...", "/..."), without the glob characters a
# path never holds but a small model writes ("~/notes/*.md").
PATH_PATTERN = r"^(~|~/[^*?]*|/[^*?]*)$"
# Any text without a "{{" (a "{" is followed by something else, or ends it).
NO_PLACEHOLDER_PATTERN = r"^([^{]|\{[^{])*\{?$"
_STEP_ARGUMENTS = frozenset(ref for ref, _ in LIST_REFERENCES)
# Lookaround and backreferences: a regular grammar cannot hold them.
_LOOKAROUND = re.compile(r"\(\?<?[=!]|\\[1-9]")


def planner_constraint(tools: Sequence[ToolSpec], observations: Mapping[int, Any], *, words_only: bool,
                       schedulable: Sequence[ToolSpec] = ()) -> CallConstraint:
    """The grammar of one planner round: a call (unless only words are asked) or an answer.
    ``schedulable``: the executors a call set up to run later may name when the round offers
    none ("remind me every Monday" offers the scheduling tool alone)."""
    if words_only or not tools:
        return CallConstraint(None)
    steps = succeeded_steps(observations)
    return CallConstraint(call_schema(tools, steps=steps, list_steps=[s for s in steps if _has_list(observations[s], s)],
                                      references=[r for s in steps for r in field_references(s, observations[s])],
                                      schedulable=schedulable))


# How many entries of a list a reference may index: the first few are what a whole-value reference picks.
INDEXED_ENTRIES = 5


def field_references(step: int, observation: Mapping[str, Any]) -> list[str]:
    """The ``{{stepN.field}}`` references piping resolves on this observation: its fields, and the
    fields of its first entries (``entries.0.path``)."""
    found = []
    for key, value in observation.items():
        if key in ("ok", "metadata") or not re.fullmatch(r"[A-Za-z0-9_-]+", key):
            continue
        found.append(f"{{{{step{step}.{key}}}}}")
        if isinstance(value, list):
            for index, entry in enumerate(value[:INDEXED_ENTRIES]):
                if isinstance(entry, Mapping):
                    found += [f"{{{{step{step}.{key}.{index}.{field}}}}}" for field in entry
                              if re.fullmatch(r"[A-Za-z0-9_-]+", str(field))]
    return found


def succeeded_steps(observations: Mapping[int, Any]) -> list[int]:
    return sorted(s for s, obs in observations.items() if isinstance(obs, Mapping) and obs.get("ok") is not False)


def call_schema(tools: Sequence[ToolSpec], *, steps: Sequence[int] = (), list_steps: Sequence[int] = (),
                references: Sequence[str] | None = None, schedulable: Sequence[ToolSpec] = ()) -> dict[str, Any]:
    """One branch for each tool, in the order offered (one for each form, for a tool of several).
    ``references``: the whole-value references a text may be (None: any field of ``steps``)."""
    if references is not None:
        reference = {"enum": list(dict.fromkeys(references))} if references else None
    else:
        reference = {"type": "string", "pattern": step_reference_pattern(steps)} if steps else None
    list_reference = {"type": "integer", "enum": list(list_steps)} if list_steps else None
    targets = [t for t in tools if t.name not in SCHEDULED_CALLS and t.name != SCRATCHPAD] or list(schedulable)
    return {"anyOf": [_call_of(form, reference, list_reference, targets) for tool in tools for form in exclusive_forms(tool)]}


def exclusive_forms(tool: ToolSpec) -> list[ToolSpec]:
    """A tool whose arguments take exactly one of several keys (``oneOf`` of ``required`` lists,
    as schedule_recurring's executor or chain), as one tool for each: each form requires its
    keys and offers none of the others', so the grammar cannot admit two at once."""
    parameters = tool.constrained_parameters or {}
    alternatives = parameters.get("oneOf")
    if not isinstance(alternatives, list) or not all(isinstance(a, dict) and set(a) <= {"required", "not"} for a in alternatives):
        return [tool]
    keys = [list(a.get("required", [])) for a in alternatives]
    forms = []
    for own in keys:
        others = {k for other in keys for k in other if k not in own}
        form = {k: v for k, v in parameters.items() if k != "oneOf"}
        form["properties"] = {k: v for k, v in parameters.get("properties", {}).items() if k not in others}
        form["required"] = list(dict.fromkeys([*parameters.get("required", []), *own]))
        forms.append(ToolSpec(name=tool.name, description=tool.description, parameters=form))
    return forms


def step_reference_pattern(steps: Sequence[int]) -> str:
    numbers = "|".join(str(s) for s in steps)
    return r"^\{\{step(" + numbers + r")\.[A-Za-z0-9_.\[\]-]+\}\}$"


def _call_of(tool: ToolSpec, reference: dict[str, Any] | None, list_reference: dict[str, Any] | None,
             offered: Sequence[ToolSpec]) -> dict[str, Any]:
    arguments = _arguments(tool, reference, list_reference)
    scheduled = SCHEDULED_CALLS.get(tool.name)
    if scheduled is not None:
        arguments = _scheduling(arguments, scheduled, offered)
    return {"type": "object", "properties": {"name": {"const": tool.name}, "arguments": arguments},
            "required": ["name", "arguments"], "additionalProperties": False}


def _scheduling(arguments: dict[str, Any], keys: tuple[str, str], offered: Sequence[ToolSpec]) -> dict[str, Any]:
    """A builtin that sets up a call to run later (``executor`` with its ``args``): one branch for each
    executor it may name, its args held to that executor's schema (the 1.5B put the cron inside the args)."""
    name_key, args_key = keys
    properties = arguments.get("properties", {})
    if name_key not in properties:
        return arguments
    targets = list(offered)
    if not targets:
        return arguments
    branches = []
    for target in targets:
        branch = copy.deepcopy(arguments)
        branch["properties"][name_key] = {"const": target.name}
        branch["properties"][args_key] = _arguments(target, None, None)
        branch["required"] = list(dict.fromkeys([*branch.get("required", []), name_key, args_key]))
        branches.append(branch)
    return {"anyOf": branches}


def _arguments(tool: ToolSpec, reference: dict[str, Any] | None, list_reference: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's arguments; ``reference``: the schema of a whole-value step reference (None: none allowed);
    ``list_reference``: the schema of from_step/with_step (None: not offered). A tool of exclusive forms gives
    one branch for each: the grammar holds no ``oneOf`` (a schedule's args name such a tool too)."""
    forms = exclusive_forms(tool)
    if len(forms) > 1:
        return {"anyOf": [_arguments(form, reference, list_reference) for form in forms]}
    arguments = copy.deepcopy(tool.constrained_parameters) or {"type": "object", "properties": {}}
    properties = arguments.get("properties")
    if isinstance(properties, dict):
        required = list(arguments.get("required", []))
        for name in list(properties):
            if name in _STEP_ARGUMENTS:
                if list_reference is not None:
                    properties[name] = dict(list_reference)
                else:
                    del properties[name]
                    required = [r for r in required if r != name]
            else:
                properties[name] = _value(name, properties[name], reference)
        arguments["required"] = required
        if not required:
            del arguments["required"]
    if arguments.get("type") == "object":
        arguments["additionalProperties"] = False
    return arguments


# The most steps a plan is written with under the grammar: each is held to reference only the steps before it.
PLAN_STEPS = 8


def plan_constraint(tools: Sequence[ToolSpec], *, recovery: bool) -> JsonConstraint | None:
    """The online planner's one reply: ``{"steps": [{"executor", "args"}], "answer"}`` over the offered tools.

    Step N's ``from_step``, ``with_step`` and ``{{stepM.field}}`` name only steps before it (M < N):
    the 1.5B's one-call plans piped step 1 from step 1, a step that had not run, and were refused.
    None for a recovery plan: it refers to steps already run in forms of its own
    (``from_earlier``, ``{{earlierN...}}``) that are not written here.
    """
    if recovery or not tools:
        return None
    positions = [{"anyOf": [_plan_step(t, n) for tool in tools for t in exclusive_forms(tool)]} for n in range(1, PLAN_STEPS + 1)]
    steps = {"type": "array", "prefixItems": positions, "items": False}
    return JsonConstraint({"type": "object", "properties": {"steps": steps, "answer": {"type": "string"}},
                           "required": ["steps", "answer"], "additionalProperties": False})


def _plan_step(tool: ToolSpec, number: int) -> dict[str, Any]:
    earlier = list(range(1, number))
    reference = {"type": "string", "pattern": step_reference_pattern(earlier)} if earlier else None
    list_reference = {"type": "integer", "enum": earlier} if earlier else None
    return {"type": "object", "properties": {"executor": {"const": tool.name}, "args": _arguments(tool, reference, list_reference)},
            "required": ["executor", "args"], "additionalProperties": False}


def _value(key: str, schema: Any, reference: dict[str, Any] | None, *, opaque: bool = False) -> Any:
    if not isinstance(schema, dict):
        return schema
    schema = dict(schema)
    # Opaque data names nothing to open, for the policy (policy._walk) and so here: a mail
    # folder ("folder", x-opaque) held to the path form was a value its executor refuses.
    opaque = schema.pop(OPAQUE_KEY, None) is True or opaque
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        # An array's elements take their meaning from the array's key, as in the policy.
        schema["items"] = _value(key, schema["items"], reference, opaque=opaque)
    elif schema.get("type") == "object" and isinstance(schema.get("properties"), dict):
        schema["properties"] = {k: _value(k, v, reference, opaque=opaque) for k, v in schema["properties"].items()}
        schema["additionalProperties"] = False
    elif (schema.get("type") == "string" and not opaque and not ({"enum", "pattern"} & set(schema))
          and is_path_argument(key, schema)):
        schema["pattern"] = PATH_PATTERN
    elif isinstance(schema.get("pattern"), str):
        if _LOOKAROUND.search(schema["pattern"]):
            # Beyond what a grammar engine compiles (a server would refuse the whole round's grammar):
            # left to the executor's validation after the call.
            del schema["pattern"]
        else:
            schema["pattern"] = whole_match(schema["pattern"])
    elif _admits_any_string(schema):
        schema["pattern"] = NO_PLACEHOLDER_PATTERN
    if reference is None:
        return schema
    return {"anyOf": [schema, reference]}


def whole_match(pattern: str) -> str:
    """An executor's ``pattern`` as the grammar holds it: matching the whole value.

    JSON Schema's pattern is a search (``^\\d{4}-\\d{2}-\\d{2}`` admits "2026-05-04 or so"), while
    grammar engines differ: llama.cpp's converter refuses a pattern not written ``^...$`` and
    llguidance has anchored every pattern in some versions and not in others. Held whole, the
    pattern admits a subset of what the executor accepts, never more, on any of them.
    """
    inner = pattern[1:] if pattern.startswith("^") else pattern
    if inner.endswith("$") and _escapes_before(inner, len(inner) - 1) % 2 == 0:
        inner = inner[:-1]
    return f"^(?:{inner})$"


def _escapes_before(text: str, index: int) -> int:
    """How many backslashes stand right before ``text[index]`` (an odd count escapes it)."""
    return index - len(text[:index].rstrip("\\"))


def _admits_any_string(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "string" and not ({"enum", "const", "pattern"} & set(schema))


def _has_list(observation: Any, step: int) -> bool:
    try:
        list_field_of(observation, step)
    except PipingError:
        return False
    return True
