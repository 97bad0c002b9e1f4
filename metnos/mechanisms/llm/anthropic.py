"""The Anthropic Messages API (api.anthropic.com, or a local server that speaks it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit


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

ANTHROPIC_VERSION = "2023-06-01"
_CLOUD_HOST = "api.anthropic.com"


def messages_url(base: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/messages"):
        return base
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


class AnthropicProvider(HTTPProvider):
    dialect = "anthropic"

    default_api_key_env = "ANTHROPIC_API_KEY"
    endpoint_for = staticmethod(messages_url)

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *, temperature: float | None = None, max_tokens: int | None = None,
                      tool_choice: str = "auto") -> dict[str, Any]:
        system, turns = encode_messages(messages)
        body: dict[str, Any] = dict(self.extra)
        body.update(
            model=self.model,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            temperature=self.temperature if temperature is None else temperature,
            messages=turns,
        )
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]
            if tool_choice != "auto":
                body["tool_choice"] = {"type": tool_choice}
        return body

    def parse(self, raw: dict[str, Any], tools: Sequence[ToolSpec], url: str) -> LLMReply:
        return parse_anthropic_reply(raw, tools, url=url)

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        key = self._env.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["x-api-key"] = key
        elif urlsplit(self.endpoint).hostname == _CLOUD_HOST:
            # A local server that speaks this API needs no key; the cloud always does.
            raise LLMConfigError(f"the Anthropic API needs a key: set the variable {self.api_key_env or 'ANTHROPIC_API_KEY'}")
        return headers


def encode_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """System text apart; user and assistant turns alternating, tool results as user blocks."""
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        # The API wants roles to alternate: consecutive same-role messages
        # (several tool results, or a result then a user note) are merged.
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for m in messages:
        if isinstance(m, SystemMessage):
            system_parts.append(m.text)
        elif isinstance(m, UserMessage):
            add("user", [{"type": "text", "text": m.text}])
        elif isinstance(m, AssistantMessage):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
            add("assistant", blocks or [{"type": "text", "text": ""}])
        elif isinstance(m, ToolResult):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.call_id, "content": m.content}
            if m.is_error:
                block["is_error"] = True
            add("user", [block])
        else:
            raise TypeError(f"not a conversation message: {type(m).__name__}")
    return "\n\n".join(system_parts), turns


def parse_anthropic_reply(raw: dict[str, Any], tools: Sequence[ToolSpec] = (), *, url: str = "") -> LLMReply:
    """Read a Messages API reply into an LLMReply; pure, so replay can call it on a recorded reply."""
    content = raw.get("content")
    if not isinstance(content, list):
        raise MalformedReply(url, "no content list in the reply")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            raise MalformedReply(url, f"content block {i} is not an object")
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            name, args = block.get("name"), block.get("input", {})
            if not isinstance(name, str) or not name:
                raise MalformedReply(url, f"tool_use block {i} has no name")
            if not isinstance(args, dict):
                raise MalformedReply(url, f"the input of tool_use {name!r} is not a JSON object")
            call_id = block.get("id") if isinstance(block.get("id"), str) and block.get("id") else derived_call_id(raw, i)
            calls.append(ToolCall(id=call_id, name=name, arguments=args))
        # Other blocks (thinking, ...) stay in raw and are not part of the answer.
    text = "".join(texts)
    form = "native" if calls else "none"
    if not calls and text:
        found = parse_text_call(text, tools, call_id=derived_call_id(raw, 0))
        if found is not None:
            calls, form = [found], "text-json"
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else {}
    return LLMReply(
        text=text,
        tool_calls=tuple(calls),
        call_form=form,
        raw=raw,
        usage=Usage(int_or_none(usage.get("input_tokens")), int_or_none(usage.get("output_tokens"))),
        model=str(raw.get("model") or ""),
        stop_reason=raw.get("stop_reason"),
    )
