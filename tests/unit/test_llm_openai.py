from __future__ import annotations

import json

import httpx
import pytest

from metnos.mechanisms.llm.errors import LLMConfigError, MalformedReply, ProviderHTTPError, ProviderTimeout, ProviderUnreachable
from metnos.mechanisms.llm.messages import AssistantMessage, LLMReply, SystemMessage, ToolCall, ToolResult, ToolSpec, UserMessage
from metnos.mechanisms.llm.openai_compat import OpenAICompatProvider, chat_completions_url, parse_openai_reply

READ = ToolSpec("read_files", "Read files.", {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}}, "required": ["paths"]})
CONVO = [
    SystemMessage("be brief"),
    UserMessage("read x"),
    AssistantMessage("", (ToolCall("c1", "read_files", {"paths": ["x"]}),)),
    ToolResult("c1", "read_files", '{"ok": true}'),
]


def reply(message: dict, **extra) -> dict:
    return {"id": "r1", "model": "m", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}, **extra}


def provider(handler, **kw) -> tuple[OpenAICompatProvider, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    p = OpenAICompatProvider(url=kw.pop("url", "http://127.0.0.1:8080"), model="qwen", transport=httpx.MockTransport(record), **kw)
    return p, seen


def test_request_shape() -> None:
    p, seen = provider(lambda r: httpx.Response(200, json=reply({"role": "assistant", "content": "done"})), extra={"chat_template_kwargs": {"enable_thinking": False}})
    p.complete(CONVO, [READ])
    (req,) = seen
    assert str(req.url) == "http://127.0.0.1:8080/v1/chat/completions"
    body = json.loads(req.content)
    assert body["model"] == "qwen" and body["temperature"] == 0.0 and body["stream"] is False
    assert body["max_tokens"] == 1024
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["tools"] == [{"type": "function", "function": {"name": "read_files", "description": "Read files.", "parameters": READ.parameters}}]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
    call = body["messages"][2]["tool_calls"][0]
    assert call["id"] == "c1" and json.loads(call["function"]["arguments"]) == {"paths": ["x"]}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'}
    assert "authorization" not in req.headers


def test_no_tools_key_when_no_tools_and_per_call_overrides() -> None:
    p, seen = provider(lambda r: httpx.Response(200, json=reply({"role": "assistant", "content": "hi"})))
    p.complete([UserMessage("hi")], temperature=0.7, max_tokens=5)
    body = json.loads(seen[0].content)
    assert "tools" not in body and body["temperature"] == 0.7 and body["max_tokens"] == 5


@pytest.mark.parametrize(("base", "endpoint"), [
    ("http://h:1", "http://h:1/v1/chat/completions"),
    ("http://h:1/v1/", "http://h:1/v1/chat/completions"),
    ("http://h:1/v1/chat/completions", "http://h:1/v1/chat/completions"),
])
def test_endpoint_from_base(base: str, endpoint: str) -> None:
    assert chat_completions_url(base) == endpoint


def test_native_call_parsed() -> None:
    raw = reply({"role": "assistant", "content": None, "tool_calls": [{"id": "abc", "type": "function", "function": {"name": "read_files", "arguments": '{"paths": ["a"]}'}}]})
    r = parse_openai_reply(raw, [READ])
    assert r.call_form == "native" and r.tool_calls == (ToolCall("abc", "read_files", {"paths": ["a"]}),)
    assert r.text == "" and not r.is_final and r.usage.input_tokens == 7 and r.model == "m"
    assert r.raw is raw


def test_native_call_to_an_unoffered_tool_is_passed_on() -> None:
    raw = reply({"role": "assistant", "tool_calls": [{"function": {"name": "summarise_pdf", "arguments": {"path": "a"}}}]})
    r = parse_openai_reply(raw, [READ])
    assert r.tool_calls[0].name == "summarise_pdf" and r.tool_calls[0].arguments == {"path": "a"}
    # No id from the server: one derived from the reply, the same every time.
    assert r.tool_calls[0].id == parse_openai_reply(raw, [READ]).tool_calls[0].id


def test_text_json_call_is_recorded_as_such() -> None:
    raw = reply({"role": "assistant", "content": '```json\n{"name": "read_files", "arguments": {"paths": ["a"]}}\n```'})
    r = parse_openai_reply(raw, [READ])
    assert r.call_form == "text-json" and r.tool_calls[0].arguments == {"paths": ["a"]}
    assert r.to_message() == AssistantMessage("", r.tool_calls)


def test_text_that_is_not_a_strict_call_stays_text() -> None:
    raw = reply({"role": "assistant", "content": '{"name": "delete_files", "arguments": {"paths": ["a"]}}'})
    r = parse_openai_reply(raw, [READ])
    assert r.call_form == "none" and r.is_final and r.text.startswith("{")


def test_reply_record_round_trip() -> None:
    raw = reply({"role": "assistant", "content": "x", "tool_calls": [{"id": "a", "function": {"name": "read_files", "arguments": "{}"}}]})
    r = parse_openai_reply(raw, [READ])
    again = LLMReply.from_record(json.loads(json.dumps(r.to_record())))
    assert again == r


@pytest.mark.parametrize(("raw", "needle"), [
    ({"choices": []}, "no choices"),
    ({"choices": [{"index": 0}]}, "no message"),
    (reply({"content": 5}), "content is int"),
    (reply({"tool_calls": {"x": 1}}), "not a list"),
    (reply({"tool_calls": [{"function": {"arguments": "{}"}}]}), "no function name"),
])
def test_malformed_replies(raw: dict, needle: str) -> None:
    with pytest.raises(MalformedReply, match=needle):
        parse_openai_reply(raw, [READ], url="http://h/v1/chat/completions")


@pytest.mark.parametrize(("arguments", "needle"), [("{oops", "not valid JSON"), ("[1]", "not an object")])
def test_unreadable_arguments_keep_the_call_with_the_problem(arguments: str, needle: str) -> None:
    # The loop sends the problem back for one correction; the reply is not lost.
    raw = reply({"tool_calls": [{"id": "c1", "function": {"name": "read_files", "arguments": arguments}}]})
    r = parse_openai_reply(raw, [READ])
    (c,) = r.tool_calls
    assert c.name == "read_files" and c.arguments == {} and needle in (c.arguments_error or "")
    assert LLMReply.from_record(json.loads(json.dumps(r.to_record()))) == r


def test_http_error_carries_status_and_server_message() -> None:
    p, _ = provider(lambda r: httpx.Response(400, json={"error": {"message": "context too long\nreally"}}))
    with pytest.raises(ProviderHTTPError) as e:
        p.complete([UserMessage("hi")])
    assert e.value.status == 400 and "context too long really" in str(e.value) and "\n" not in str(e.value)
    assert e.value.to_dict()["status"] == 400


def test_long_error_body_is_cut() -> None:
    p, _ = provider(lambda r: httpx.Response(502, text="x" * 5000))
    with pytest.raises(ProviderHTTPError) as e:
        p.complete([UserMessage("hi")])
    assert len(str(e.value)) < 500


def test_non_json_body_is_malformed() -> None:
    p, _ = provider(lambda r: httpx.Response(200, text="<html>proxy</html>"))
    with pytest.raises(MalformedReply, match="not JSON"):
        p.complete([UserMessage("hi")])


def test_transport_failures_map_to_unreachable() -> None:
    def refuse(r: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    p, _ = provider(refuse, url="http://user:secret@127.0.0.1:9/v1?key=k")
    with pytest.raises(ProviderUnreachable) as e:
        p.complete([UserMessage("hi")])
    msg = str(e.value)
    assert "connection refused" in msg and "127.0.0.1:9" in msg
    assert "secret" not in msg and "key=k" not in msg

    def slow(r: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out")

    p, _ = provider(slow, timeout_s=3)
    with pytest.raises(ProviderTimeout, match="no reply within 3 s"):
        p.complete([UserMessage("hi")])


def test_api_key_goes_in_the_header_only_from_the_named_variable() -> None:
    p, seen = provider(lambda r: httpx.Response(200, json=reply({"content": "ok"})), api_key_env="MY_KEY", env={"MY_KEY": "sk-123"})
    p.complete([UserMessage("hi")])
    assert seen[0].headers["authorization"] == "Bearer sk-123"
    assert "sk-123" not in repr(p)
    p2, _ = provider(lambda r: httpx.Response(200, json=reply({"content": "ok"})), api_key_env="MY_KEY", env={})
    with pytest.raises(LLMConfigError, match="MY_KEY is not set"):
        p2.complete([UserMessage("hi")])


def test_tool_choice_none_shows_the_tools_and_takes_a_written_call_as_text() -> None:
    """Asked for words, the model sees the same tools (the prompt's prefix is the round
    before's) and a call it writes anyway is text for the loop to judge, not a call."""
    written = '```json\n{"name": "read_files", "arguments": {"paths": ["x"]}}\n```'
    p, seen = provider(lambda r: httpx.Response(200, json=reply({"role": "assistant", "content": written})))
    got = p.complete(CONVO, [READ], tool_choice="none")
    body = json.loads(seen[0].content)
    assert body["tool_choice"] == "none" and [t["function"]["name"] for t in body["tools"]] == ["read_files"]
    assert got.is_final and got.text == written
    # The same reply under "auto" is a call.
    assert not p.complete(CONVO, [READ]).is_final and "tool_choice" not in json.loads(seen[1].content)
    with pytest.raises(ValueError, match="tool_choice"):
        p.complete(CONVO, [READ], tool_choice="required")
