"""Online mode (seeds/002 ch. 3): one model call proposes the whole plan.

The model is shown the request and the tools (name, what it does, argument
schema) and answers with one JSON object:

    {"steps": [{"executor": "find_files", "args": {"base_path": "~", "pattern": "*.md"}},
               {"executor": "read_files", "args": {"from_step": 1}}],
     "answer": "Your notes: {{step2.entries.0.content}}"}

Steps are numbered from 1 within the plan; ``from_step`` and ``{{stepN.field}}``
pipe between them (metnos/runtime/step/piping.py) and the answer is a template whose
``{{stepN.path}}`` slots are filled from what the steps produced. The loop
then plays the plan like a cascade plan (metnos/runtime/cascade/player.py): each call
passes the shape grammar, the schema, the policy, the vaglio and the approval
like any, and no model is asked again. When a step fails, one recovery call
gets the failure and proposes the rest.

A plan proposed after earlier steps (a recovery, a hybrid escalation) is
shifted by :func:`shift` so that its own step 1 is the turn's next step.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from domain.errors import MetnosError
from metnos.mechanisms.llm.messages import Message, SystemMessage, ToolSpec, UserMessage
from metnos.runtime.turn.filler import FILLER
from metnos.runtime.step.piping import FROM_STEP
from metnos.runtime.turn.side_call import reply_object
from metnos.settings import i18n

ONLINE_PROMPT = i18n.texts().text("prompt.online")  # the English catalogue, byte for byte

RECOVERY_PROMPT = i18n.texts().text("prompt.online_recovery")  # the English catalogue, byte for byte

_REF = re.compile(r"\{\{\s*step(\d+)((?:\.[A-Za-z0-9_]+)*)\s*\}\}")
_EARLIER = re.compile(r"\{\{\s*earlier(\d+)((?:\.[A-Za-z0-9_]+)*)\s*\}\}")
FROM_EARLIER = "from_earlier"


class PlanUnreadable(MetnosError):
    """The model's reply is not a plan; the message says what is wrong with it."""


def planner_messages(request_text: str, tools: list[ToolSpec], prompt: str = ONLINE_PROMPT + "Tools:\n") -> list[Message]:
    listed = "\n".join(orjson.dumps({"name": t.name, "description": t.description, "parameters": t.parameters}).decode() for t in tools)
    return [SystemMessage(prompt + listed), UserMessage(request_text)]


def recovery_messages(request_text: str, tools: list[ToolSpec], done: list[dict[str, Any]], failure: str,
                      prompt: str = ONLINE_PROMPT + "Tools:\n") -> list[Message]:
    history = orjson.dumps({"earlier_steps": done, "failure": failure}).decode()
    return [*planner_messages(request_text, tools, prompt), UserMessage(f"{RECOVERY_PROMPT}\n{history}")]


def read_plan(text: str) -> dict[str, Any]:
    """The plan in the model's text: {"steps": [{"executor", "args"}], "answer": str}, checked for form."""
    data, problem = reply_object(text)
    if problem is not None:
        raise PlanUnreadable(problem)
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise PlanUnreadable('the reply has no "steps" list')
    steps = []
    for number, step in enumerate(data["steps"], start=1):
        if isinstance(step, dict) and "output" in step and "args" not in step:
            # A step that already ran, copied back from the recovery prompt with its output: the
            # 1.5B did so, and read as a call without arguments it ran find_files with none.
            continue
        if not isinstance(step, dict) or not isinstance(step.get("executor"), str) or not isinstance(step.get("args", {}), dict):
            raise PlanUnreadable(f'step {number} is not {{"executor": name, "args": {{...}}}}')
        steps.append({"executor": step["executor"], "args": dict(step.get("args", {}))})
    answer = data.get("answer", "")
    if not isinstance(answer, str):
        raise PlanUnreadable('"answer" is not a string')
    if not steps and not answer.strip():
        raise PlanUnreadable("the plan has no steps and no answer")
    return {"steps": steps, "answer": answer}


def _path(step: int, dotted: str) -> list[Any]:
    return [step, *(int(p) if p.isdigit() else p for p in dotted.split(".") if p)]


def _ref_segments(answer: str, shift_by: int) -> list[dict[str, Any]]:
    segments: list[dict[str, Any]] = []
    at = 0
    for m in re.finditer(f"{_REF.pattern}|{_EARLIER.pattern}", answer):
        if m.start() > at:
            segments.append({"text": answer[at:m.start()]})
        if m.group(1) is not None:
            segments.append({"ref": _path(int(m.group(1)) + shift_by, m.group(2))})
        else:
            segments.append({"ref": _path(int(m.group(3)), m.group(4))})
        at = m.end()
    if at < len(answer):
        segments.append({"text": answer[at:]})
    return segments


def answer_segments(answer: str, shift_by: int, *, fillers: bool = False) -> list[dict[str, Any]]:
    """The answer as the cascade's template segments (domain/cascade/template.py);
    with ``fillers``, each ``${FILLER: ...}`` a ``filler`` segment (metnos/runtime/turn/filler.py)."""
    if not fillers:
        return _ref_segments(answer, shift_by)
    segments: list[dict[str, Any]] = []
    at = 0
    for m in FILLER.finditer(answer):
        segments += _ref_segments(answer[at:m.start()], shift_by)
        segments.append({"filler": _shift_value(m.group(1), shift_by)})
        at = m.end()
    return segments + _ref_segments(answer[at:], shift_by)


def _shift_value(value: Any, by: int) -> Any:
    if isinstance(value, str):
        value = _REF.sub(lambda m: "{{step%d%s}}" % (int(m.group(1)) + by, m.group(2)), value)
        return _EARLIER.sub(lambda m: "{{step%s%s}}" % (m.group(1), m.group(2)), value)
    if isinstance(value, list):
        return [_shift_value(v, by) for v in value]
    if isinstance(value, dict):
        shifted = {}
        for k, v in value.items():
            if k == FROM_STEP and isinstance(v, int) and not isinstance(v, bool):
                shifted[k] = v + by
            elif k == FROM_EARLIER and isinstance(v, int) and not isinstance(v, bool):
                shifted[FROM_STEP] = v
            else:
                shifted[k] = _shift_value(v, by)
        return shifted
    return value


def shift(plan: dict[str, Any], by: int, *, fillers: bool = False) -> dict[str, Any]:
    """The plan as the player follows it: ``by`` steps already taken, its
    references moved past them, the answer as template segments; the steps
    already taken are held by ``None`` so the player's index is the turn's step."""
    steps = [{"executor": s["executor"], "args": _shift_value(s["args"], by)} for s in plan["steps"]]
    return {"steps": [None] * by + steps, "answer": answer_segments(plan["answer"], by, fillers=fillers)}
