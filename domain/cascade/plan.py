"""A plan: the executor chain of a good turn, with its arguments, and its answer template.

``{"steps": [{"executor", "version", "args"}], "answer": [segments]}``. The
arguments are those the model proposed, piping included (``from_step``,
``{{stepN.field}}``): a plan run again resolves them against the new outputs.
A template is a plan whose slot values (:mod:`domain.cascade.request`) are
holes, ``⟦i⟧`` inside a string or ``{"$slot": i}`` for a whole number, and
the file name of a path slot ``⟦i:name⟧`` (the answer "d.txt says ..." to
"read ~/notes/d.txt").
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from domain.canonical import canonical_hash
from domain.cascade.request import Slot
from domain.cascade.template import MIN_STRING, make_template

HOLE = "⟦{}⟧"
NAME_HOLE = "⟦{}:name⟧"
# The step-number references a call's arguments can hold (metnos/runtime/step/piping.py).
LIST_REFERENCES = ("from_step", "with_step")
_PLACEHOLDER = re.compile(r"(\{\{\s*step)(\d+)")


def steps_that_ran(steps: dict[int, dict[str, Any]], skipped: set[int]) -> list[dict[str, Any]] | None:
    """A turn's steps without those that never ran (a duplicate read the loop
    intercepted, a call refused for its form), in order, their references to
    earlier steps numbered again; None when a step that ran refers to one that
    did not (its plan could not be followed)."""
    renumbered = {old: new for new, old in enumerate((n for n in sorted(steps) if n not in skipped), start=1)}
    gone = False

    def step_of(old: int) -> int:
        nonlocal gone
        if old not in renumbered:
            gone = True
            return old
        return renumbered[old]

    def placeholders(value: Any) -> Any:
        if isinstance(value, str):
            return _PLACEHOLDER.sub(lambda m: m.group(1) + str(step_of(int(m.group(2)))), value)
        if isinstance(value, dict):
            return {k: placeholders(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placeholders(v) for v in value]
        return value

    kept = []
    for old in sorted(renumbered):
        args = {}
        for key, value in steps[old]["args"].items():
            if key in LIST_REFERENCES and not isinstance(value, bool) and str(value).strip().isdigit():
                new = step_of(int(str(value).strip()))
                args[key] = str(new) if isinstance(value, str) else new
            else:
                args[key] = placeholders(value)
        kept.append({**steps[old], "args": args})
    return None if gone else kept


def plan_of(steps: list[dict[str, Any]], answer: str) -> dict[str, Any]:
    """The plan of a turn whose every step ran and succeeded, in order."""
    outputs = {i: s["output"] for i, s in enumerate(steps, start=1)}
    return {
        "steps": [{"executor": s["executor"], "version": s["version"], "args": s["args"]} for s in steps],
        "answer": make_template(answer, outputs),
    }


def plan_id(plan: dict[str, Any]) -> str:
    body = {"steps": [{"executor": s["executor"], "args": s["args"]} for s in plan["steps"]], "answer": plan["answer"]}
    return canonical_hash(body)[:24]


def executors_of(plan: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["executor"], s["version"]) for s in plan["steps"]]


def hollow_text(text: str, slots: list[Slot]) -> str:
    """The text with each slot value of its request made a hole, and the file
    name of a path slot ("d.txt" of "~/notes/d.txt") a hole of that name."""
    for i, slot in enumerate(slots):
        if slot.value and slot.value in text:
            text = text.replace(slot.value, HOLE.format(i))
    for i, slot in enumerate(slots):
        name = _file_name(slot)
        if name is not None and name in text:
            # The name as a word of its own: "a.txt" is not the end of "data.txt".
            hole = NAME_HOLE.format(i)
            text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", lambda _m, hole=hole: hole, text)
    return text


def _file_name(slot: Slot) -> str | None:
    if slot.kind != "path":
        return None
    name = posixpath.basename(slot.value.rstrip("/"))
    return name if len(name) >= MIN_STRING and name != slot.value else None


def generalise(plan: dict[str, Any], slots: list[Slot]) -> dict[str, Any]:
    """The plan with each slot value of its request made a hole."""

    def hollow(value: Any) -> Any:
        if isinstance(value, str):
            return hollow_text(value, slots)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            for i, slot in enumerate(slots):
                if slot.kind == "number" and slot.value == str(value):
                    return {"$slot": i}
            return value
        if isinstance(value, dict):
            return {k: hollow(v) for k, v in value.items()}
        if isinstance(value, list):
            return [hollow(v) for v in value]
        return value

    steps = [{**s, "args": hollow(s["args"])} for s in plan["steps"]]
    answer = [{"text": hollow(seg["text"])} if "text" in seg else seg for seg in plan["answer"]]
    return {"steps": steps, "answer": answer}


def bind(template: dict[str, Any], values: list[str]) -> dict[str, Any]:
    """The plan a template gives for these slot values (same kinds, same order)."""

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            for i, v in enumerate(values):
                value = value.replace(HOLE.format(i), v).replace(NAME_HOLE.format(i), posixpath.basename(v.rstrip("/")))
            return value
        if isinstance(value, dict):
            if set(value) == {"$slot"}:
                number = values[value["$slot"]]
                return float(number) if "." in number else int(number)
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    steps = [{**s, "args": fill(s["args"])} for s in template["steps"]]
    answer = [{"text": fill(seg["text"])} if "text" in seg else seg for seg in template["answer"]]
    return {"steps": steps, "answer": answer}


def holes_used(template: dict[str, Any]) -> bool:
    """Whether any slot of the request reaches the template's arguments."""
    text = repr([s["args"] for s in template["steps"]])
    return "⟦" in text or "'$slot'" in text
