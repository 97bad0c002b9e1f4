"""What the model and the log are shown of a turn's data: observations with the home written ``~``, messages as records."""

from __future__ import annotations

import time
from typing import Any

import orjson

from metnos.mechanisms.llm.messages import LLMReply, Message, SystemMessage, ToolCall, ToolResult, UserMessage
from metnos.runtime.step.piping import FROM_STEP


def elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def pipes(call: ToolCall) -> bool:
    """Whether a call works on an earlier step's data (``from_step`` or a ``{{stepN.field}}``)."""
    return FROM_STEP in call.arguments or "{{step" in orjson.dumps(call.arguments).decode()


def call_as_text(reply: LLMReply) -> str:
    """A reply's calls as the text a model would have written for them (judged as a call written as text)."""
    calls = "\n".join(orjson.dumps({"name": c.name, "arguments": c.arguments}).decode() for c in reply.tool_calls)
    return f"{reply.text}\n{calls}".strip()


def shown_content(observation: dict[str, Any], home: str) -> str:
    """An observation as the model reads it: paths in the home written ``~/...``, the
    form the request uses and the policy expects. Shown /tmp/x/Desktop/a.jpg for a
    request about ~/Pictures, the 1.5B guessed /home/metnos/Pictures and was refused."""
    return orjson.dumps(home_relative(observation, home.rstrip("/")), option=orjson.OPT_SORT_KEYS).decode()


def home_relative(value: Any, home: str) -> Any:
    if isinstance(value, str):
        if not home:
            return value
        if value == home:
            return "~"
        return "~" + value[len(home):] if value.startswith(home + "/") else value
    if isinstance(value, dict):
        return {k: home_relative(v, home) for k, v in value.items()}
    if isinstance(value, list):
        return [home_relative(v, home) for v in value]
    return value


def message_record(message: Message) -> dict[str, Any]:
    if isinstance(message, ToolResult):
        return {"role": "tool", "call_id": message.call_id, "name": message.name, "content": message.content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "text": message.text}
    if isinstance(message, UserMessage):
        return {"role": "user", "text": message.text}
    return {"role": "assistant", "text": message.text, "tool_calls": [c.to_dict() for c in message.tool_calls]}
