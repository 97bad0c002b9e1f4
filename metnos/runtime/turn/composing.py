"""Answers Metnos makes itself from what the steps produced, when the model's words are not to be had."""

from __future__ import annotations

import re
from typing import Any

import orjson

from metnos.runtime.turn.shown import home_relative

ANSWER_LIMIT = 8000

# Verbs whose steps work data out (a slice, a sort, a count), rather than fetch or pass it on.
WORKING_OUT_VERBS = frozenset({"extract", "sort", "compute", "group", "classify", "compare"})


def compose_answer(observations: list[dict[str, Any]], request: str = "") -> str:
    """An answer made of what earlier steps produced: their content, or their
    entries' content, as text (bounded). An entry's fields the request names
    come with it: "Dora's phone number" gets her phones beside her name, which
    alone would answer nothing."""
    named = set(re.findall(r"[a-z]+", request.casefold()))
    parts: list[str] = []
    for obs in observations:
        content = obs.get("content")
        if isinstance(content, (str, int, float)) and not isinstance(content, bool):
            parts.append(str(content))
            continue
        entries = obs.get("entries")
        if isinstance(entries, list):
            for e in entries:
                # An entry as a line a person reads: its content or text, else its path or name.
                value = next((e[k] for k in ("content", "text", "path", "name") if e.get(k) is not None), None) if isinstance(e, dict) else None
                line = str(value) if value is not None else orjson.dumps(e).decode()
                asked = [f"{k}: {_values(v)}" for k, v in e.items() if _named(k, named) and v not in (None, "", [])] if isinstance(e, dict) else []
                parts.append("; ".join([line, *asked]) if asked and value is not None else line)
            continue
        rest = {k: v for k, v in obs.items() if k not in ("ok", "metadata")}
        if rest:
            parts.append(orjson.dumps(rest).decode())
    text = "\n".join(p.strip("\n") for p in parts).strip()
    return text if len(text) <= ANSWER_LIMIT else text[:ANSWER_LIMIT] + "\n[… cut]"


def _named(field: str, words: set[str]) -> bool:
    """The request names the field, as it is or in the singular ("phone" for ``phones``)."""
    field = field.casefold()
    return field in words or field.removesuffix("s") in words or field.removesuffix("es") in words


def _values(value: Any) -> str:
    """A field as a person reads it: a list of ``{"value", "type"}`` as its values (with their kind)."""
    if isinstance(value, list):
        return ", ".join(_values(v) for v in value)
    if isinstance(value, dict) and "value" in value:
        kind = value.get("type")
        return f"{value['value']} ({kind})" if kind else str(value["value"])
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def worked_out(executor: str) -> bool:
    """Whether the executor's steps work data out (its verb: extract, sort, compute...)."""
    return executor.split("_", 1)[0] in WORKING_OUT_VERBS


def textual(observation: Any) -> bool:
    """The step gave text (a file's content), not a list of records."""
    if not isinstance(observation, dict):
        return False
    entries = observation.get("entries")
    return isinstance(observation.get("content"), str) or (
        isinstance(entries, list) and any(isinstance(e, dict) and isinstance(e.get("content"), str) for e in entries))


def listing(observation: dict[str, Any], home: str) -> str:
    """A worked-out result as an answer: its text, or one line an entry (its text,
    content or path, paths in the home written ``~/...``)."""
    content = observation.get("content")
    if isinstance(content, str) and content.strip():
        return content.strip("\n")
    lines = []
    for entry in observation.get("entries") or []:
        value = next((entry[k] for k in ("text", "content", "path", "name") if isinstance(entry, dict) and entry.get(k) is not None), entry)
        if isinstance(value, dict) and value and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value.values()):
            # A table's row: its cells, in the table's order ("2026-05-04, tea, 4.5").
            value = ", ".join(str(v) for v in value.values())
        lines.append(home_relative(value, home.rstrip("/")) if isinstance(value, str) else orjson.dumps(value).decode())
    return "\n".join(str(line) for line in lines) if lines else compose_answer([observation])
