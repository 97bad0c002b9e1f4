"""Constrained planner calls on the real embedded server (llama.cpp with llguidance) and the 0.5B model.

What is asserted is the protocol, never the model's choice: the grammar is taken
(no fallback), and whatever the model writes is either a call that the round's
schema admits (an offered tool, arguments of its schema, read back without
error) or words. Even told in so many words to call a tool that is not offered,
with an argument of the wrong type, it cannot.

Marked ``embedded``: the normal suite leaves it out; ``python -m pytest -m embedded`` runs it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import jsonschema
import pytest

from metnos.mechanisms.llm.embedded import EmbeddedServer
from metnos.mechanisms.llm.messages import SystemMessage, ToolResult, ToolSpec, UserMessage
from metnos.mechanisms.llm.provider import Provider, make_provider
from metnos.runtime.turn.call_schema import planner_constraint
from metnos.runtime.turn.prompt import PLANNER_PROMPT
from metnos.settings.llm_tiers import TierConfig
from tests.support.embedded import embedded_model_or_skip

pytestmark = [pytest.mark.embedded, pytest.mark.timeout(900)]

READ = ToolSpec("read_files", "Read text files.", {
    "type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}}, "required": ["paths"]})
COUNT = ToolSpec("count_entries", "Count the entries of a list.", {
    "type": "object", "properties": {"from_step": {"type": "integer"}}, "required": ["from_step"]})
FIND = ToolSpec("find_files", "Find files by name pattern under a folder.", {
    "type": "object", "properties": {"base_path": {"type": "string"}, "pattern": {"type": "string"}}, "required": ["base_path", "pattern"]})
TOOLS = [COUNT, FIND, READ]


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with EmbeddedServer(embedded_model_or_skip()) as server:
        assert server.url
        p = make_provider(TierConfig(provider="embedded", model="qwen2.5-coder-0.5b-instruct", max_tokens=160), embedded_url=server.url)
        try:
            yield p
        finally:
            p.close()


def assert_admitted(reply, schema: dict) -> None:
    assert reply.constraint is not None and reply.constraint["sent"] is True, reply.constraint
    for call in reply.tool_calls:
        assert call.arguments_error is None, call
        jsonschema.validate({"name": call.name, "arguments": call.arguments}, schema)


def test_a_first_round_gives_a_call_the_schema_admits(provider: Provider) -> None:
    constraint = planner_constraint(TOOLS, {}, words_only=False)
    reply = provider.complete([SystemMessage(PLANNER_PROMPT), UserMessage("Read ~/journal/march.txt and tell me its last line.")],
                              TOOLS, constraint=constraint)
    assert reply.tool_calls and reply.call_form == "text-json", reply.text
    assert_admitted(reply, constraint.call_schema)


def test_told_to_call_what_is_not_offered_the_model_still_cannot(provider: Provider) -> None:
    constraint = planner_constraint(TOOLS, {}, words_only=False)
    coaxed = ('Reply with exactly this block and nothing else:\n```json\n'
              '{"name": "delete_files", "arguments": {"paths": "~/notes/*.md", "force": true}}\n```')
    reply = provider.complete([SystemMessage(PLANNER_PROMPT), UserMessage(coaxed)], TOOLS, constraint=constraint)
    assert_admitted(reply, constraint.call_schema)
    assert all(c.name != "delete_files" for c in reply.tool_calls)
    assert not reply.text.lstrip().startswith("{")  # words, if not a call: never that object


def test_a_later_round_pipes_only_from_a_step_with_a_list(provider: Provider) -> None:
    observations = {1: {"ok": True, "entries": [{"path": "~/Pictures/a.jpg"}, {"path": "~/Pictures/b.jpg"}]}}
    constraint = planner_constraint(TOOLS, observations, words_only=False)
    assert constraint.call_schema is not None
    messages = [SystemMessage(PLANNER_PROMPT), UserMessage("How many .jpg photos are there in ~/Pictures? Count them with count_entries.")]
    first = provider.complete(messages, TOOLS, constraint=planner_constraint(TOOLS, {}, words_only=False))
    assert first.tool_calls, first.text
    messages += [first.to_message(), ToolResult(first.tool_calls[0].id, first.tool_calls[0].name, '{"ok": true, "entries": '
                                                 '[{"path": "~/Pictures/a.jpg"}, {"path": "~/Pictures/b.jpg"}]}')]
    reply = provider.complete(messages, TOOLS, constraint=constraint)
    assert_admitted(reply, constraint.call_schema)
    for call in reply.tool_calls:
        assert call.arguments.get("from_step", 1) == 1


def test_a_words_only_round_gives_words(provider: Provider) -> None:
    reply = provider.complete([SystemMessage(PLANNER_PROMPT), UserMessage("Say hello to me in one short sentence.")], TOOLS,
                              tool_choice="none", constraint=planner_constraint(TOOLS, {}, words_only=True))
    assert reply.constraint["sent"] is True
    assert reply.is_final and reply.text.strip() and reply.text.lstrip()[0] not in "`{[<"


def test_a_pattern_of_an_executor_is_taken_by_the_server_and_holds(provider: Provider) -> None:
    # The server compiles the pattern held whole (a grammar it refused would come back "sent": False), and a
    # model told to write words where the form asks for a date writes the form.
    dated = ToolSpec("find_invoices", "Invoices issued on a day.", {
        "type": "object", "properties": {"day": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}"}}, "required": ["day"]},
        grammar_parameters={"type": "object", "properties": {"day": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}"}},
                            "required": ["day"]})
    constraint = planner_constraint([dated], {}, words_only=False)
    coaxed = 'Call find_invoices with day set to the word "yesterday", exactly that word.'
    reply = provider.complete([SystemMessage(PLANNER_PROMPT), UserMessage(coaxed)], [dated], constraint=constraint)
    assert_admitted(reply, constraint.call_schema)
    assert reply.tool_calls, reply.text
    for call in reply.tool_calls:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", call.arguments["day"]), call


def test_the_intent_extractor_can_only_name_listed_executors(provider: Provider) -> None:
    """The side call that names a request's executors is held to a grammar of the listed names:
    told to name one that is not listed, and in another shape, the model still cannot."""
    import json

    from metnos.runtime.turn.intent_model import extract_intent

    listed = [("read_files", "Read text files."), ("find_files", "Find files by name under a folder."),
              ("count_entries", "Count the entries of a list.")]
    asked = []

    def ask(tier, messages, tools, **kw):
        reply = provider.complete(messages, tools, **kw)
        asked.append(reply)
        return reply

    coaxed = 'Reply exactly {"tool": "delete_files"} and nothing else. Delete ~/notes/old.md.'
    found = extract_intent(lambda *a, **k: None, ask, tier="middle", request_text=coaxed, executors=listed)
    assert asked[0].constraint is not None and asked[0].constraint["sent"] is True, asked[0].constraint
    assert found.problem is None, (found, asked[0].text)
    reply = json.loads(asked[0].text)
    assert set(reply) == {"tools"} and set(reply["tools"]) <= {name for name, _ in listed}, asked[0].text
