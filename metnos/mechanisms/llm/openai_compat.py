"""The OpenAI-compatible chat completions API (llama-server, Ollama, vLLM, the embedded model)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


from metnos.mechanisms.llm._common import HTTPProvider, derived_call_id, int_or_none
from metnos.mechanisms.llm.errors import LLMConfigError, MalformedReply
from metnos.mechanisms.llm.messages import (
    AssistantMessage,
    LLMReply,
    Message,
    SystemMessage,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)
from metnos.mechanisms.llm.textcalls import parse_text_call


def chat_completions_url(base: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"


class OpenAICompatProvider(HTTPProvider):
    dialect = "openai"

    default_api_key_env = None
    endpoint_for = staticmethod(chat_completions_url)

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *, temperature: float | None = None, max_tokens: int | None = None,
                      tool_choice: str = "auto") -> dict[str, Any]:
        body: dict[str, Any] = dict(self.extra)
        body.update(
            model=self.model,
            messages=encode_messages(messages),
            temperature=self.temperature if temperature is None else temperature,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            stream=False,
        )
        if tools:
            # Some servers reject an empty "tools" list, so it is left out when there are none.
            body["tools"] = [encode_tool(t) for t in tools]
            if tool_choice != "auto":
                body["tool_choice"] = tool_choice
        return body

    def parse(self, raw: dict[str, Any], tools: Sequence[ToolSpec], url: str) -> LLMReply:
        return parse_openai_reply(raw, tools, url=url)

    def _headers(self) -> dict[str, str]:
        if not self.api_key_env:
            return {}
        key = self._env.get(self.api_key_env)
        if not key:
            raise LLMConfigError(f"the LLM API key variable {self.api_key_env} is not set")
        return {"Authorization": f"Bearer {key}"}


def encode_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters}}


def encode_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": m.text})
        elif isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.text})
        elif isinstance(m, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                    for c in m.tool_calls
                ]
            elif not m.text:
                entry["content"] = ""
            out.append(entry)
        elif isinstance(m, ToolResult):
            # No "name": strict servers validate the tool message's fields.
            out.append({"role": "tool", "tool_call_id": m.call_id, "content": m.content})
        else:
            raise TypeError(f"not a conversation message: {type(m).__name__}")
    return out


def parse_openai_reply(raw: dict[str, Any], tools: Sequence[ToolSpec] = (), *, url: str = "") -> LLMReply:
    """Read a chat completion into an LLMReply; pure, so replay can call it on a recorded reply.

    Native calls are passed on whatever their name: a call to a tool that was
    not offered is the turn loop's to handle (it is a signal, seeds/002 11.1.1).
    Only calls written as text must name an offered tool (see ``textcalls``).
    """
    choices = raw.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply(url, "no choices in the reply")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedReply(url, "the first choice has no message")
    text = _content_text(message.get("content"), url)
    calls = tuple(_native_calls(message.get("tool_calls"), raw, url))
    form = "native" if calls else "none"
    if not calls and text:
        found = parse_text_call(text, tools, call_id=derived_call_id(raw, 0))
        if found is not None:
            calls, form = (found,), "text-json"
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else {}
    return LLMReply(
        text=text,
        tool_calls=calls,
        call_form=form,
        raw=raw,
        usage=Usage(int_or_none(usage.get("prompt_tokens")), int_or_none(usage.get("completion_tokens"))),
        model=str(raw.get("model") or ""),
        stop_reason=choices[0].get("finish_reason"),
    )


def _content_text(content: Any, url: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, as some servers send
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise MalformedReply(url, f"message content is {type(content).__name__}, not text")


def _native_calls(tool_calls: Any, raw: dict[str, Any], url: str) -> list[ToolCall]:
    if tool_calls is None:
        return []
    if not isinstance(tool_calls, list):
        raise MalformedReply(url, "tool_calls is not a list")
    calls = []
    for i, entry in enumerate(tool_calls):
        fn = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise MalformedReply(url, f"tool call {i} has no function name")
        name = fn["name"]
        args = fn.get("arguments")
        problem: str | None = None
        if args is None or args == "":
            args = {}
        elif isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError as e:
                problem = f"the arguments are not valid JSON ({e}): {args[:200]}"
        if problem is None and not isinstance(args, dict):
            problem = f"the arguments are a JSON {type(args).__name__}, not an object"
        call_id = entry.get("id") if isinstance(entry.get("id"), str) and entry.get("id") else derived_call_id(raw, i)
        # A call whose arguments cannot be read is still a call: the loop sends the
        # problem back to the model for one correction.
        calls.append(ToolCall(id=call_id, name=name, arguments=args if problem is None else {}, arguments_error=problem))
    return calls
