"""The embedded model answering a real tool call through our provider clients.

Needs the xllamacpp extra and the installed model (``metnos model install``);
it looks for the model at $METNOS_EMBEDDED_MODEL, else in the workspace's
models dir, and skips with the reason when either is missing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from metnos.mechanisms.llm.anthropic import AnthropicProvider
from metnos.mechanisms.llm.embedded import EmbeddedServer
from metnos.mechanisms.llm.messages import SystemMessage, ToolResult, ToolSpec, UserMessage
from metnos.mechanisms.llm.openai_compat import OpenAICompatProvider
from metnos.runtime.turn.prompt import answer_from_results
from tests.support.embedded import embedded_model_or_skip

pytestmark = [pytest.mark.embedded, pytest.mark.timeout(240)]

READ = ToolSpec(
    "read_files",
    "Read text files and return their contents.",
    {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}, "minItems": 1}}, "required": ["paths"], "additionalProperties": False},
)
LIST = ToolSpec("list_files", "List the files in a folder.", {"type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]})
SYSTEM = SystemMessage("You are Metnos, a personal agent. Use the tools to act.")


def _model() -> Path:
    return embedded_model_or_skip()


@pytest.fixture(scope="module")
def server():
    s = EmbeddedServer(_model())
    t0 = time.monotonic()
    s.start()
    print(f"embedded model served in {time.monotonic() - t0:.1f} s")
    yield s
    s.stop()
    assert not s.running


def test_openai_endpoint_returns_a_native_tool_call(server) -> None:
    p = OpenAICompatProvider(url=server.url, model="embedded", timeout_s=120, max_tokens=256)
    r = p.complete([SYSTEM, UserMessage("Read the file notes.txt and tell me what it says.")], [READ, LIST])
    assert r.call_form == "native", r.raw
    assert r.tool_calls[0].name == "read_files"
    assert r.tool_calls[0].arguments == {"paths": ["notes.txt"]}
    assert r.raw["choices"][0]["message"]["tool_calls"]  # the server's own tool_calls, not our text parsing

    # The answer round as the loop asks it of a request that changes nothing (metnos/runtime/turn/loop.py):
    # the same tools with tool_choice "none", and the request restated after the result.
    request = "Read the file notes.txt and tell me what it says."
    follow = [SYSTEM, UserMessage(request), r.to_message(),
              ToolResult(r.tool_calls[0].id, "read_files", '{"ok": true, "files": [{"path": "notes.txt", "text": "buy milk"}]}'),
              UserMessage(answer_from_results(request))]
    answer = p.complete(follow, [READ, LIST], tool_choice="none")
    assert answer.is_final and "milk" in answer.text, answer.text


def test_anthropic_endpoint_returns_tool_use(server) -> None:
    p = AnthropicProvider(url=server.url, model="embedded", timeout_s=120, max_tokens=256, api_key_env=None)
    r = p.complete([SYSTEM, UserMessage("What files are in my Documents folder?")], [READ, LIST])
    assert r.call_form == "native", r.raw
    assert r.tool_calls[0].name == "list_files" and r.tool_calls[0].arguments == {"folder": "Documents"}
    assert any(b["type"] == "tool_use" for b in r.raw["content"])


def test_plain_question_gets_plain_text(server) -> None:
    p = OpenAICompatProvider(url=server.url, model="embedded", timeout_s=120, max_tokens=64)
    r = p.complete([SYSTEM, UserMessage("What is 2+2? Answer with the number only.")], [READ, LIST])
    assert r.call_form == "none" and "4" in r.text
