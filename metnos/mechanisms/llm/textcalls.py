"""A tool call written as JSON in the message text, accepted strictly.

Small local models often answer ``{"name": "read_files", "arguments": {...}}``
(bare, fenced as ```json, or in <tool_call> tags) instead of using the API's
tool-call field. We take such a text as a call only when the whole message is
that one JSON object, the name is one of the offered tools, and the arguments
validate against that tool's JSON Schema. Anything else stays a plain text
answer: a wrong guess here would run an executor nobody asked for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError

from metnos.mechanisms.llm.messages import ToolCall, ToolSpec

_FENCED = re.compile(r"\A```[ \t]*(?:json)?[ \t]*\n(?P<body>.*?)\n?[ \t]*```\Z", re.DOTALL | re.IGNORECASE)
_TAGGED = re.compile(r"\A<tool_call>\s*(?P<body>.*?)\s*</tool_call>\Z", re.DOTALL)


@dataclass(frozen=True)
class TextCallVerdict:
    """The call found in a text, or why the text is not one (for logs and tests)."""

    call: ToolCall | None
    reason: str | None = None


def find_text_call(text: str, tools: Sequence[ToolSpec], *, call_id: str) -> TextCallVerdict:
    body = _unwrap(text.strip())
    if body is None or not body.startswith("{"):
        return TextCallVerdict(None, "not a lone JSON object")
    try:
        data = json.loads(body)
    except ValueError:
        return TextCallVerdict(None, "not valid JSON")
    if not isinstance(data, dict) or set(data) != {"name", "arguments"}:
        return TextCallVerdict(None, "not an object with exactly 'name' and 'arguments'")
    name, arguments = data["name"], data["arguments"]
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return TextCallVerdict(None, "'name' is not a string or 'arguments' is not an object")
    spec = next((t for t in tools if t.name == name), None)
    if spec is None:
        return TextCallVerdict(None, f"{name!r} is not an offered tool")
    problem = _schema_problem(spec.parameters, arguments)
    if problem:
        return TextCallVerdict(None, f"arguments for {name!r} do not validate: {problem}")
    return TextCallVerdict(ToolCall(id=call_id, name=name, arguments=arguments))


def parse_text_call(text: str, tools: Sequence[ToolSpec], *, call_id: str) -> ToolCall | None:
    return find_text_call(text, tools, call_id=call_id).call


def _unwrap(text: str) -> str | None:
    for pattern in (_FENCED, _TAGGED):
        m = pattern.match(text)
        if m:
            inner = m.group("body").strip()
            # A fence inside tags (or tags inside a fence) is one wrapping too many.
            return inner if not (inner.startswith("```") or inner.startswith("<")) else None
    return text


def _schema_problem(schema: dict[str, Any], instance: dict[str, Any]) -> str | None:
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        error = jsonschema.exceptions.best_match(cls(schema).iter_errors(instance))
    except SchemaError as e:
        return f"the tool's schema is invalid ({e.message})"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(top)"
    return f"{where}: {error.message}" if isinstance(error, ValidationError) else str(error)
