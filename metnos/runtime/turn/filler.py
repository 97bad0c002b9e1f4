"""Fillers on the fast tier (seeds/002 ch. 4): text an online plan cannot
write before its steps have run.

An online plan is written in one call, before any result is seen, so
"put the gist of ~/trip.md in ~/trip-gist.txt" has no way to say what the gist
is. With ``[runtime] fillers = true`` the planner may leave, in an argument
or in the answer, ``${FILLER: what to write {{stepN.path}}}``. When the plan
reaches it, the ``{{stepN.path}}`` references are replaced by what those
steps produced, and the fast tier writes the text, in a context of its own
(the request and the instruction with its data; nothing else of the turn).

Each filler is a side call (metnos/runtime/turn/side_call.py) and a ``FillerWritten``
event, so replay feeds the same text back. A filler that cannot be written
(a reference without a value, an unreachable model, an empty reply) raises
:class:`FillerFailed`, and the plan treats it as a failed step.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from domain.turn import Turn
from domain.errors import MetnosError
from metnos.mechanisms.llm.errors import LLMError
from metnos.runtime.turn.side_call import AskModel, Record, ask_side
from metnos.settings import i18n

FILLER_PROMPT = i18n.texts().text("prompt.filler")  # the English catalogue, byte for byte
# What the online planner is told, when fillers are on.
FILLER_RULE = i18n.texts().text("prompt.filler_rule")  # the English catalogue, byte for byte
FILLER = re.compile(r"\$\{FILLER:\s*((?:[^{}]|\{\{[^{}]*\}\})*?)\s*\}")
_REF = re.compile(r"\{\{\s*step(\d+)((?:\.[A-Za-z0-9_]+)*)\s*\}\}")
MAX_DATA_CHARS = 12_000
MAX_TEXT_CHARS = 20_000


class FillerFailed(MetnosError):
    """A filler could not be written; the message says which and why."""


def has_fillers(value: Any) -> bool:
    if isinstance(value, str):
        return FILLER.search(value) is not None
    if isinstance(value, dict):
        return any(has_fillers(v) for v in value.values())
    if isinstance(value, list):
        return any(has_fillers(v) for v in value)
    return False


def _value_at(outputs: dict[int, Any], step: int, dotted: str) -> Any:
    value: Any = outputs.get(step)
    if value is None:
        raise FillerFailed(f"the filler refers to step {step}, which produced nothing")
    for key in (p for p in dotted.split(".") if p):
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise FillerFailed(f"the filler refers to step {step}'s {dotted.strip('.')}, which its output lacks")
    return value


def with_data(instruction: str, outputs: dict[int, Any]) -> str:
    """The instruction with each ``{{stepN.path}}`` replaced by that value (JSON when not a string)."""
    def one(m: re.Match[str]) -> str:
        value = _value_at(outputs, int(m.group(1)), m.group(2))
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        return text if len(text) <= MAX_DATA_CHARS else text[:MAX_DATA_CHARS] + f" [... {len(text) - MAX_DATA_CHARS} more characters]"
    return _REF.sub(one, instruction)


class Filler:
    """Writes the fillers of one turn's plan; ``record`` records on that turn."""

    def __init__(self, record: Record, ask_model: AskModel, *, tier: str, request_text: str,
                 system_prompt: str = FILLER_PROMPT, round_of: Callable[[], int] = lambda: 0) -> None:
        self.record = record
        self.ask_model = ask_model
        self.tier = tier
        self.request_text = request_text
        self.system_prompt = system_prompt
        self.round_of = round_of

    def write(self, instruction: str, outputs: dict[int, Any], *, step: int | None, where: str) -> str:
        try:
            data = with_data(instruction, outputs)
        except FillerFailed as e:
            self._written(step, where, instruction, None, "", str(e))
            raise
        reply = ask_side(self.record, self.ask_model, round=self.round_of(), role="filler", tier=self.tier,
                         system=self.system_prompt, user=f"The user's request: {self.request_text}\nInstruction: {data}")
        if isinstance(reply, LLMError):
            problem = f"the filler for {where} could not be asked: {reply}"
            self._written(step, where, instruction, None, "", problem)
            raise FillerFailed(problem)
        text = reply.text.strip()[:MAX_TEXT_CHARS]
        if not text:
            problem = f"the filler for {where} came back empty"
            self._written(step, where, instruction, None, reply.model, problem)
            raise FillerFailed(problem)
        self._written(step, where, instruction, text, reply.model, None)
        return text

    def _written(self, step: int | None, where: str, instruction: str, text: str | None, model: str, problem: str | None) -> None:
        self.record(Turn.FillerWritten, step=step, where=where, instruction=instruction[:2000], text=text,
                    tier=self.tier, model=model, problem=problem)

    def fill_value(self, value: Any, outputs: dict[int, Any], *, step: int, where: str) -> Any:
        """``value`` (an argument) with each filler in it written."""
        if isinstance(value, str):
            return FILLER.sub(lambda m: self.write(m.group(1), outputs, step=step, where=where), value)
        if isinstance(value, dict):
            return {k: self.fill_value(v, outputs, step=step, where=f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [self.fill_value(v, outputs, step=step, where=f"{where}.{i}") for i, v in enumerate(value)]
        return value

    def fill_segments(self, segments: list[dict[str, Any]], outputs: dict[int, Any]) -> list[dict[str, Any]]:
        """An answer template with its ``filler`` segments written as text."""
        return [{"text": self.write(s["filler"], outputs, step=None, where="answer")} if "filler" in s else s
                for s in segments]
