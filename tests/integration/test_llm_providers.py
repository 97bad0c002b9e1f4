"""Both providers against a real HTTP server on 127.0.0.1 (the scripted LLM)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from metnos.mechanisms.llm.errors import MalformedReply, ProviderHTTPError, ProviderTimeout, ProviderUnreachable
from metnos.mechanisms.llm.messages import SystemMessage, ToolResult, ToolSpec, UserMessage
from metnos.mechanisms.llm.provider import make_provider
from metnos.settings.llm_tiers import TierConfig
from tests.support.scripted_llm import (
    ScriptedLLM,
    call,
    hang_up,
    http_error,
    malformed,
    scripted_llm,  # noqa: F401 - the fixture
    slow,
    text,
    text_call,
)

READ = ToolSpec("read_files", "Read files.", {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}}, "required": ["paths"]})


def provider_for(dialect: str, url: str, **kw):
    return make_provider(TierConfig(provider=dialect, url=url, model="m", **kw), env={})


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_a_two_step_conversation(scripted_llm, dialect: str) -> None:
    llm = scripted_llm([call("read_files", {"paths": ["x"]}), text("x says hello")], dialect=dialect)
    p = provider_for(dialect, llm.url)
    convo = [SystemMessage("sys"), UserMessage("what is in x?")]
    first = p.complete(convo, [READ])
    assert first.call_form == "native" and first.tool_calls[0].name == "read_files"
    assert first.tool_calls[0].arguments == {"paths": ["x"]}
    convo += [first.to_message(), ToolResult(first.tool_calls[0].id, "read_files", '{"text": "hello"}')]
    second = p.complete(convo, [READ])
    assert second.is_final and second.text == "x says hello" and second.call_form == "none"
    assert [r.dialect for r in llm.requests] == [dialect, dialect]
    sent = llm.requests[1]
    assert sent.tool_names == ["read_files"]
    if dialect == "openai":
        assert sent.messages[-1] == {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": '{"text": "hello"}'}
    else:
        assert sent.body["system"] == "sys"
        assert sent.messages[-1]["content"][0]["tool_use_id"] == first.tool_calls[0].id
    p.close()


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_text_json_call_over_the_wire(scripted_llm, dialect: str) -> None:
    llm = scripted_llm([text_call("read_files", {"paths": ["y"]}), text_call("rm_rf", {"paths": ["/"]})], dialect=dialect)
    p = provider_for(dialect, llm.url)
    r = p.complete([UserMessage("read y")], [READ])
    assert r.call_form == "text-json" and r.tool_calls[0].arguments == {"paths": ["y"]}
    r = p.complete([UserMessage("read y")], [READ])
    assert r.call_form == "none" and r.tool_calls == ()


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_http_errors_and_malformed_bodies(scripted_llm, dialect: str) -> None:
    llm = scripted_llm([http_error(503, "loading model"), malformed(), hang_up()], dialect=dialect)
    p = provider_for(dialect, llm.url)
    with pytest.raises(ProviderHTTPError, match="HTTP 503: loading model"):
        p.complete([UserMessage("hi")])
    with pytest.raises(MalformedReply, match="not JSON"):
        p.complete([UserMessage("hi")])
    with pytest.raises(ProviderUnreachable, match="closed before a complete reply"):
        p.complete([UserMessage("hi")])
    with pytest.raises(ProviderHTTPError, match="script exhausted after 3"):
        p.complete([UserMessage("hi")])


def test_slow_server_times_out(scripted_llm) -> None:
    llm = scripted_llm([slow(text("late"), 2.0)])
    p = provider_for("openai", llm.url, timeout_s=0.3)
    t0 = time.monotonic()
    with pytest.raises(ProviderTimeout, match="no reply within 0.3 s"):
        p.complete([UserMessage("hi")])
    assert time.monotonic() - t0 < 1.5


def test_wrong_dialect_path_is_refused() -> None:
    with ScriptedLLM([text("x")], dialect="openai") as llm:
        with pytest.raises(ProviderHTTPError, match="404"):
            provider_for("anthropic", llm.url).complete([UserMessage("hi")])
        assert llm.remaining == 1


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_closed_port_is_unreachable_with_one_line(dialect: str) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(ProviderUnreachable) as e:
        provider_for(dialect, url).complete([UserMessage("hi")])
    assert str(e.value) == f"the LLM server at {url}/v1/{'chat/completions' if dialect == 'openai' else 'messages'} is unreachable: connection refused"
    assert e.value.to_dict()["error"] == "provider_unreachable"


def test_closed_port_through_the_cli_error_path_has_no_traceback() -> None:
    # The CLI prints MetnosError as one line; an LLMError is one.
    code = (
        "import sys\n"
        "from domain.errors import MetnosError\n"
        "from metnos.mechanisms.llm.provider import make_provider\n"
        "from metnos.settings.llm_tiers import TierConfig\n"
        "from metnos.mechanisms.llm.messages import UserMessage\n"
        f"p = make_provider(TierConfig(provider='openai', url='http://127.0.0.1:{_closed_port()}'))\n"
        "try:\n    p.complete([UserMessage('hi')])\n"
        "except MetnosError as e:\n    print(f'metnos: {e}', file=sys.stderr); sys.exit(2)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "unreachable: connection refused" in proc.stderr


def test_dynamic_steps_see_the_request(scripted_llm) -> None:
    llm = scripted_llm([lambda req: text(f"you sent {len(req.messages)} messages")])
    r = provider_for("openai", llm.url).complete([SystemMessage("s"), UserMessage("u")])
    assert r.text == "you sent 2 messages"
