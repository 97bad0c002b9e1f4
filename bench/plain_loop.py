"""The baseline of the agent benchmark: a plain tool-calling loop over OpenAI chat completions.

What anyone would write in an afternoon: the request, nine tools offered
natively, call what the model asks for, feed the result back, stop when it
answers. No pre-filter, no grammar, no guards, no sandbox.
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

SYSTEM = (
    "You are a helpful assistant on the user's own computer. Their home folder is ~. "
    "Use the tools to do what they ask, then answer briefly with the result."
)
MAX_STEPS = 10
RESULT_CHARS = 6000


@dataclass
class LoopResult:
    answer: str
    steps: int
    prompt_tokens: int
    llm_calls: int
    error: str | None = None


def tool_spec(fn: Callable[..., Any]) -> dict[str, Any]:
    """An OpenAI tool description from a function's signature and its docstring's Args lines."""
    doc = inspect.getdoc(fn) or ""
    summary = doc.split("\n\n")[0].replace("\n", " ")
    arg_help = dict(re.findall(r"^\s*(\w+): (.+)$", doc.split("Args:")[-1], re.M)) if "Args:" in doc else {}
    props, required = {}, []
    for name, p in inspect.signature(fn).parameters.items():
        kind = {str: "string", bool: "boolean", int: "integer"}.get(p.annotation if not isinstance(p.annotation, str) else
                                                                     {"str": str, "bool": bool, "int": int}.get(p.annotation), "string")
        props[name] = {"type": kind, "description": arg_help.get(name, name)}
        if p.default is inspect.Parameter.empty:
            required.append(name)
    return {"type": "function", "function": {"name": fn.__name__, "description": summary,
                                             "parameters": {"type": "object", "properties": props, "required": required}}}


def call_tool(tools: dict[str, Callable[..., Any]], name: str, raw_args: str) -> str:
    fn = tools.get(name)
    if fn is None:
        return f"error: no tool named {name}"
    try:
        args = json.loads(raw_args or "{}")
        if not isinstance(args, dict):
            raise ValueError("arguments must be a JSON object")
        result = fn(**args)
    except Exception as e:  # noqa: BLE001 - the model sees the error and may try again
        return f"error: {type(e).__name__}: {e}"
    text = result if isinstance(result, str) else json.dumps(result)
    return text[:RESULT_CHARS]


def run_plain_loop(base_url: str, model: str, request: str, tools: dict[str, Callable[..., Any]], *,
                   timeout_s: float = 300.0, max_tokens: int = 512) -> LoopResult:
    specs = [tool_spec(fn) for fn in tools.values()]
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": request}]
    steps = prompt_tokens = calls = 0
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=base_url.rstrip("/"), trust_env=False) as client:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return LoopResult("", steps, prompt_tokens, calls, "timeout")
            try:
                r = client.post("/v1/chat/completions", timeout=left, json={
                    "model": model, "messages": messages, "tools": specs, "temperature": 0.0, "max_tokens": max_tokens})
                r.raise_for_status()
                body = r.json()
            except (httpx.HTTPError, ValueError) as e:
                return LoopResult("", steps, prompt_tokens, calls, f"llm: {e}")
            calls += 1
            prompt_tokens += int((body.get("usage") or {}).get("prompt_tokens") or 0)
            msg = body["choices"][0]["message"]
            tool_calls = msg.get("tool_calls") or []
            if not tool_calls:
                return LoopResult(msg.get("content") or "", steps, prompt_tokens, calls)
            if steps >= MAX_STEPS:
                return LoopResult(msg.get("content") or "", steps, prompt_tokens, calls, "step cap")
            messages.append({"role": "assistant", "content": msg.get("content") or "", "tool_calls": tool_calls})
            for tc in tool_calls:
                steps += 1
                out = call_tool(tools, tc["function"]["name"], tc["function"].get("arguments") or "{}")
                messages.append({"role": "tool", "tool_call_id": tc.get("id", ""), "content": out})
