"""The JSON object a model's reply holds, when a side call (a judge, a plan, a schedule's reading) asks for one."""

from __future__ import annotations

import re
from typing import Any

import orjson

# From the first "{" to the last "}": fences and words around the object are the model's, not the answer.
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def reply_object(text: str) -> tuple[Any, str | None]:
    """The JSON object a model's reply holds (from its first ``{`` to its last
    ``}``, fences and words around it ignored), or None and why not."""
    found = _OBJECT.search(text or "")
    if found is None:
        return None, "the reply holds no JSON object"
    try:
        return orjson.loads(found.group(0)), None
    except orjson.JSONDecodeError as e:
        return None, f"the reply's JSON does not parse: {e}"
