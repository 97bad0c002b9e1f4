from __future__ import annotations

import json

import httpx
import pytest

from metnos.mechanisms.llm.anthropic import AnthropicProvider, parse_anthropic_reply
from metnos.mechanisms.llm.errors import LLMConfigError, MalformedReply, ProviderHTTPError
from metnos.mechanisms.llm.messages import AssistantMessage, SystemMessage, ToolCall, ToolResult, ToolSpec, UserMessage

READ = ToolSpec("read_files", "Read files.", {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}}, "required": ["paths"]})


def make(handler, url="http://127.0.0.1:8080", env=None, **kw):
    seen: list[httpx.Request] = []

    def record(r):
        seen.append(r)
        return handler(r)

    return AnthropicProvider(url=url, model="claude", transport=httpx.MockTransport(record), env=env or {}, **kw), seen


OK = {"id": "m1", "model": "claude", "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn", "usage": {"input_tokens": 4, "output_tokens": 2}}


def test_request_shape_alternates_and_merges_tool_results() -> None:
    p, seen = make(lambda r: httpx.Response(200, json=OK), env={"ANTHROPIC_API_KEY": "k-1"})
    convo = [
        SystemMessage("be brief"),
        UserMessage("read a and b"),
        AssistantMessage("reading", (ToolCall("t1", "read_files", {"paths": ["a"]}), ToolCall("t2", "read_files", {"paths": ["b"]}))),
        ToolResult("t1", "read_files", '{"ok": true}'),
        ToolResult("t2", "read_files", '{"ok": false}', is_error=True),
    ]
    p.complete(convo, [READ])
    req = seen[0]
    assert str(req.url) == "http://127.0.0.1:8080/v1/messages"
    assert req.headers["anthropic-version"] == "2023-06-01" and req.headers["x-api-key"] == "k-1"
    body = json.loads(req.content)
    assert body["system"] == "be brief" and body["max_tokens"] == 1024 and body["temperature"] == 0.0
    assert body["tools"] == [{"name": "read_files", "description": "Read files.", "input_schema": READ.parameters}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "reading"},
        {"type": "tool_use", "id": "t1", "name": "read_files", "input": {"paths": ["a"]}},
        {"type": "tool_use", "id": "t2", "name": "read_files", "input": {"paths": ["b"]}},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": '{"ok": true}'},
        {"type": "tool_result", "tool_use_id": "t2", "content": '{"ok": false}', "is_error": True},
    ]


def test_local_server_needs_no_key_but_the_cloud_does() -> None:
    p, seen = make(lambda r: httpx.Response(200, json=OK))
    p.complete([UserMessage("hi")])
    assert "x-api-key" not in seen[0].headers
    cloud, sent = make(lambda r: httpx.Response(200, json=OK), url="https://api.anthropic.com")
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        cloud.complete([UserMessage("hi")])
    assert sent == []


def test_tool_use_reply() -> None:
    raw = {"model": "claude", "content": [{"type": "text", "text": "let me look"}, {"type": "tool_use", "id": "tu1", "name": "read_files", "input": {"paths": ["a"]}}], "stop_reason": "tool_use", "usage": {"input_tokens": 9, "output_tokens": 1}}
    r = parse_anthropic_reply(raw, [READ])
    assert r.call_form == "native" and r.tool_calls == (ToolCall("tu1", "read_files", {"paths": ["a"]}),)
    assert r.text == "let me look" and r.stop_reason == "tool_use" and r.usage.output_tokens == 1


def test_text_json_in_a_text_block() -> None:
    raw = {"content": [{"type": "text", "text": '{"name": "read_files", "arguments": {"paths": ["z"]}}'}]}
    r = parse_anthropic_reply(raw, [READ])
    assert r.call_form == "text-json" and r.tool_calls[0].arguments == {"paths": ["z"]}


def test_thinking_blocks_are_not_the_answer() -> None:
    raw = {"content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "42"}]}
    r = parse_anthropic_reply(raw, [])
    assert r.text == "42" and r.call_form == "none"


@pytest.mark.parametrize(("raw", "needle"), [
    ({"type": "message"}, "no content list"),
    ({"content": ["x"]}, "not an object"),
    ({"content": [{"type": "tool_use", "input": {}}]}, "has no name"),
    ({"content": [{"type": "tool_use", "name": "read_files", "input": [1]}]}, "not a JSON object"),
])
def test_malformed(raw: dict, needle: str) -> None:
    with pytest.raises(MalformedReply, match=needle):
        parse_anthropic_reply(raw, [READ])


def test_anthropic_error_body() -> None:
    p, _ = make(lambda r: httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    with pytest.raises(ProviderHTTPError, match="HTTP 529: Overloaded"):
        p.complete([UserMessage("hi")])


def test_key_is_never_in_errors() -> None:
    p, _ = make(lambda r: httpx.Response(401, json={"error": {"message": "invalid x-api-key"}}), env={"ANTHROPIC_API_KEY": "sk-ant-SECRET"})
    with pytest.raises(ProviderHTTPError) as e:
        p.complete([UserMessage("hi")])
    assert "SECRET" not in str(e.value) and "SECRET" not in json.dumps(e.value.to_dict())


def test_tool_choice_none_is_sent_in_anthropic_words() -> None:
    p, seen = make(lambda r: httpx.Response(200, json={"id": "m1", "model": "claude", "role": "assistant", "stop_reason": "end_turn",
                                                       "content": [{"type": "text", "text": "the answer"}], "usage": {"input_tokens": 3, "output_tokens": 2}}),
                   env={"ANTHROPIC_API_KEY": "k"})
    tool = ToolSpec("read_files", "Read files.", {"type": "object", "properties": {}})
    assert p.complete([UserMessage("read x")], [tool], tool_choice="none").text == "the answer"
    body = json.loads(seen[0].content)
    assert body["tool_choice"] == {"type": "none"} and body["tools"][0]["name"] == "read_files"
