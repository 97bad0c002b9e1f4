"""A turn whose one call a channel chose: an MCP client's tool call (docs/channels.md, "MCP calls are turns").

The request is the call written out, ``call NAME {"arg": ...}`` (the arguments as
canonical JSON), and the turn's mode is ``call``: the loop (metnos/runtime/turn/loop.py)
runs that one call as a step, with the checks, the approval and the recording of any
step (before-images included, so ``metnos undo`` puts back what it wrote), and answers
with its observation. No model is asked. A replay reads the call back from the recorded
request and runs the same step.
"""

from __future__ import annotations

from typing import Any

import orjson

CALL_MODE = "call"
_PREFIX = "call "


class NotACall(ValueError):
    """A request of mode ``call`` that does not read ``call NAME {json}``."""


def call_text(name: str, args: dict[str, Any]) -> str:
    """The request a call turn records: the executor and its arguments, canonical."""
    return f"{_PREFIX}{name} {orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()}"


def parse_call(text: str) -> tuple[str, dict[str, Any]]:
    if not text.startswith(_PREFIX):
        raise NotACall(f"a call turn's request reads 'call NAME {{json}}', not {text[:80]!r}")
    name, _, raw = text[len(_PREFIX):].partition(" ")
    try:
        args = orjson.loads(raw or "{}")
    except orjson.JSONDecodeError as e:
        raise NotACall(f"a call turn's arguments are not JSON: {e}") from None
    if not name or not isinstance(args, dict):
        raise NotACall(f"a call turn's request names an executor and a JSON object, not {text[:80]!r}")
    return name, args
