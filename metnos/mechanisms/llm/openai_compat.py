"""The OpenAI-compatible chat completions API (llama-server, Ollama, vLLM, the embedded model)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Literal

import httpx

from metnos.mechanisms.llm._common import HTTPProvider, derived_call_id, int_or_none
from metnos.mechanisms.llm.constraint import Constraint
from metnos.mechanisms.llm.errors import LLMConfigError, MalformedReply, ProviderHTTPError
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
from metnos.mechanisms.llm.transport import post_json, public_url

# Whether to send a round's grammar: "on" for a server known to take it (the embedded
# llama.cpp), "probe" to ask the server whether it is llama.cpp first (its /props), "off".
GrammarUse = Literal["on", "probe", "off"]
# The statuses with which a server refuses a request field it does not take.
_REFUSED = (400, 422)


def chat_completions_url(base: str) -> str:
    base = base.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"


class OpenAICompatProvider(HTTPProvider):
    dialect = "openai"

    default_api_key_env = None
    endpoint_for = staticmethod(chat_completions_url)

    def __init__(self, *, grammar: GrammarUse = "off", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.grammar = grammar
        # Why this server gets no grammar, once known (it is asked once, and a refusal holds for the provider's life).
        self._no_grammar: str | None = "constrained calls are off for this tier" if grammar == "off" else None
        self._probed = grammar != "probe"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *, temperature: float | None = None,
                 max_tokens: int | None = None, tool_choice: str = "auto", constraint: Constraint | None = None) -> LLMReply:
        """With a ``constraint``, the reply is held to its grammar where the server takes one;
        where it does not (not llama.cpp, or it answers 400), the request goes as it would have
        without, and the reply's ``constraint`` record says which it was."""
        if constraint is None:
            return self._complete_plain(messages, tools, temperature=temperature, max_tokens=max_tokens, tool_choice=tool_choice)
        why_not = self._why_no_grammar()
        if why_not is None:
            body = self.build_request(messages, tools, temperature=temperature, max_tokens=max_tokens, tool_choice=tool_choice)
            body["grammar"] = constraint.grammar()
            if tools:
                # llama.cpp takes a grammar beside tools only with tool_choice "none"; the tools
                # still make the prompt, and the call comes back as text, for read_reply.
                body["tool_choice"] = "none"
            try:
                raw = post_json(self._client, self.endpoint, body, headers=self._headers(), timeout_s=self.timeout_s)
            except ProviderHTTPError as e:
                if e.status not in _REFUSED:
                    raise
                self._no_grammar = why_not = f"the server refused the grammar (HTTP {e.status}: {e.body_excerpt[:200]})"
            else:
                reply = parse_constrained_reply(raw, constraint, url=public_url(self.endpoint))
                return dataclasses.replace(reply, constraint=constraint.record(sent=True))
        reply = self._complete_plain(messages, tools, temperature=temperature, max_tokens=max_tokens, tool_choice=tool_choice)
        return dataclasses.replace(reply, constraint=constraint.record(sent=False, why_not=why_not))

    def _why_no_grammar(self) -> str | None:
        if not self._probed:
            self._probed = True
            self._no_grammar = self._probe()
        return self._no_grammar

    def _probe(self) -> str | None:
        """None when the server says it is llama.cpp (whose /props carries a build_info)."""
        base = self.endpoint.removesuffix("/chat/completions").removesuffix("/v1")
        try:
            response = self._client.get(f"{base}/props", headers=self._headers(), timeout=5.0)
            props = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            props = None
        if isinstance(props, dict) and "build_info" in props:
            return None
        # No address in it: the record is compared on replay, where the same server may sit elsewhere.
        return "the server does not say it is llama.cpp (no build_info at /props)"

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


def parse_constrained_reply(raw: dict[str, Any], constraint: Constraint, *, url: str = "") -> LLMReply:
    """Read a reply written under ``constraint``'s grammar: its text is a fenced call or the answer."""
    reply = parse_openai_reply(raw, (), url=url)
    if reply.tool_calls:
        return reply
    call = constraint.read_reply(reply.text, call_id=derived_call_id(raw, 0), cut_off=reply.stop_reason == "length")
    return reply if call is None else dataclasses.replace(reply, tool_calls=(call,), call_form="text-json")


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
