"""Issue 17 item 5: the first prompt of a turn is small and starts the same way every turn.

The prompt is captured from the real loop (pre-filter, shortlist, tools,
messages) on an initialised workspace with the seed catalogue; its tokens are
counted by the embedded model's own server (its chat template through
/apply-template, its tokenizer through /tokenize).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from bench._turns import turn_loop
from metnos.mechanisms.llm.embedded import EmbeddedServer
from metnos.mechanisms.llm.messages import AssistantMessage, LLMReply, SystemMessage, ToolResult, UserMessage
from metnos.mechanisms.llm.openai_compat import OpenAICompatProvider
from metnos.runtime.booted import Runtime
from metnos.runtime.turn.loop import TurnRequest
from tests.support.embedded import embedded_model_or_skip
from tests.support.turn_ports import InProcessPorts

REQUESTS = (
    "what time is it in Tokyo",
    "read ~/notes/diary.md and tell me the last three lines",
    "find the pdf files in ~/papers and sort them by size",
    "write a shopping list with milk and eggs to ~/list.txt",
    "every friday at 6 remind me to call my sister",
)
LIMIT = 600


class Capture(InProcessPorts):
    def __init__(self, runtime, start) -> None:  # noqa: ANN001
        super().__init__(runtime)
        self.t = start
        self.first = None

    def ask_llm(self, tier, messages, tools, *, tool_choice="auto", constraint=None):  # noqa: ANN001, ANN201
        self.first = self.first or (list(messages), list(tools))
        return LLMReply(text="done", tool_calls=(), call_form="none", raw={})


def first_prompts(home: Path) -> list[tuple]:
    out = []
    with Runtime.boot(birth=False) as rt:
        for i, text in enumerate(REQUESTS):
            # Each turn at another time, with other ids: none of it may reach the prefix.
            ports = Capture(rt, InProcessPorts.start + timedelta(days=i, minutes=7 * i))
            turn_loop(rt, ports, dict(os.environ)).run(TurnRequest(text=text))
            out.append(ports.first)
    return out


def test_nothing_turn_specific_comes_before_the_request_and_tools_are_in_name_order(home: Path) -> None:
    prompts = first_prompts(home)
    systems = {m[0].text for m, _ in prompts}
    assert len(systems) == 1  # the same system prompt for every turn
    for (messages, tools), text in zip(prompts, REQUESTS):
        assert isinstance(messages[0], SystemMessage) and isinstance(messages[1], UserMessage)
        assert messages[1].text == text
        # After the request, only what the turn read for it (opening reads, metnos/runtime/turn/sources.py).
        rest = messages[2:]
        assert all(isinstance(m, ToolResult) or (isinstance(m, AssistantMessage) and all(c.id.startswith("opening-") for c in m.tool_calls))
                   for m in rest), rest
        names = [t.name for t in tools]
        assert names == sorted(names) and names
    system = systems.pop()
    for stamp in ("2026", "11-2", "T0", ":00"):
        assert stamp not in system


def test_the_same_tools_in_any_ranking_make_the_same_list(home: Path) -> None:
    from metnos.runtime.turn.session import turn_catalogue

    with Runtime.boot(birth=False) as rt:
        catalogue = turn_catalogue(rt)
        a = catalogue.tools(["read_files", "find_files", "schedule_recurring"], with_scratchpad=False, step_refs=False)
        b = catalogue.tools(["schedule_recurring", "read_files", "find_files"], with_scratchpad=False, step_refs=False)
    assert a == b


@pytest.fixture(scope="module")
def server_url() -> str:
    server = EmbeddedServer(embedded_model_or_skip())
    try:
        yield server.start()
    finally:
        server.stop()


def tokens(client: httpx.Client, url: str, messages, tools) -> list[int]:  # noqa: ANN001
    body = OpenAICompatProvider(url=url, model="embedded", timeout_s=60).build_request(messages, tools)
    prompt = client.post(f"{url}/apply-template", json={"messages": body["messages"], "tools": body.get("tools", [])})
    prompt.raise_for_status()
    r = client.post(f"{url}/tokenize", json={"content": prompt.json()["prompt"]})
    r.raise_for_status()
    return r.json()["tokens"]


def test_the_first_prompt_fits_600_tokens_and_shares_its_prefix(home: Path, server_url: str) -> None:
    prompts = first_prompts(home)
    with httpx.Client(timeout=120, trust_env=False) as client:
        counted = [tokens(client, server_url, m, t) for m, t in prompts]
        system_only = tokens(client, server_url, prompts[0][0][:1], [])
    assert max(len(t) for t in counted) <= LIMIT, [len(t) for t in counted]
    # Every prompt starts with the same system prompt and tools header, token
    # for token: what llama.cpp's cache reuses from the previous turn.
    header = len(system_only) - 3  # the system turn's closing tokens differ once tools follow
    for a, b in zip(counted, counted[1:]):
        assert a[:header] == b[:header]
