"""Tiers by role (issue 20 item 2): the ladder a failing proposer climbs, reasoning in each provider's words."""

from __future__ import annotations

import pytest

from metnos.mechanisms.llm.provider import request_extra
from metnos.settings.llm_tiers import ROLE_TIERS, TierConfig, settings_from_mapping, tier_ladder
from metnos.runtime.turn.online import answer_segments, read_plan, shift
from metnos.runtime.turn.filler import FillerFailed, has_fillers, with_data
from metnos.runtime.turn.intent_model import read_tools
from metnos.settings.runtime import RuntimeConfig, recorded_runtime


def test_roles_sit_on_the_seeds_tiers() -> None:
    assert ROLE_TIERS["proposer"] == "wise" and ROLE_TIERS["judge"] == "middle" and ROLE_TIERS["intent"] == "middle"
    assert ROLE_TIERS["filler"] == "fast" and ROLE_TIERS["summariser"] == "fast"


def test_the_ladder_has_each_distinct_model_once_and_the_frontier_only_when_asked() -> None:
    data = {"llm": {"tiers": {"fast": {"provider": "openai", "url": "http://127.0.0.1:1", "model": "s"},
                              "wise": {"provider": "openai", "url": "http://127.0.0.1:2", "model": "b"},
                              "frontier": {"provider": "anthropic", "model": "c"}}}}
    settings = settings_from_mapping(data, {})
    assert tier_ladder(settings) == ["fast", "wise"]  # middle aliases fast: nothing new
    assert tier_ladder(settings, with_frontier=True) == ["fast", "wise", "frontier"]
    config = RuntimeConfig(tier_ladder=("fast", "wise"))
    assert config.tier_above("fast") == "wise" and config.tier_above("wise") is None
    assert RuntimeConfig(tier_ladder=("fast", "wise"), escalate_tiers=False).tier_above("fast") is None


def test_reasoning_is_said_in_each_providers_words() -> None:
    openai = TierConfig(provider="openai", url="http://127.0.0.1:1", reasoning=False)
    assert request_extra(openai) == {"chat_template_kwargs": {"enable_thinking": False}}
    anthropic = TierConfig(provider="anthropic", reasoning=True, max_tokens=4096)
    assert request_extra(anthropic) == {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert request_extra(TierConfig(provider="anthropic", reasoning=False)) == {}
    assert request_extra(TierConfig(provider="openai", url="http://127.0.0.1:1")) == {}


def test_an_online_plan_is_shifted_past_the_steps_already_taken() -> None:
    plan = read_plan('Here: {"steps": [{"executor": "find_files", "args": {"base_path": "~"}},'
                     ' {"executor": "read_files", "args": {"from_step": 1, "x": "{{step1.entries.0.path}}"}}],'
                     ' "answer": "It says {{step2.entries.0.content}}, see {{earlier1.content}}"}')
    shifted = shift(plan, 2)
    assert shifted["steps"][:2] == [None, None]
    assert shifted["steps"][3]["args"] == {"from_step": 3, "x": "{{step3.entries.0.path}}"}
    assert shifted["answer"] == [{"text": "It says "}, {"ref": [4, "entries", 0, "content"]}, {"text": ", see "}, {"ref": [1, "content"]}]
    assert answer_segments("plain", 0) == [{"text": "plain"}]


def test_a_filler_in_an_answer_is_its_own_segment_with_its_references_shifted() -> None:
    segments = answer_segments("Saved. ${FILLER: the gist of {{step1.content}}} Done {{step2.ok}}", 3, fillers=True)
    assert segments == [{"text": "Saved. "}, {"filler": "the gist of {{step4.content}}"}, {"text": " Done "}, {"ref": [5, "ok"]}]
    # Off, the marker is plain text around an ordinary reference, as before fillers existed.
    assert {"filler": "the gist of {{step4.content}}"} not in answer_segments("${FILLER: the gist of {{step1.content}}}", 3)


def test_filler_data_is_the_referenced_values_and_a_missing_one_is_named() -> None:
    outputs = {1: {"entries": [{"content": "alpha"}], "count": 1}}
    assert with_data("sum up {{step1.entries.0.content}} ({{step1.count}} of {{step1.entries}})", outputs) == \
        'sum up alpha (1 of [{"content":"alpha"}])'
    with pytest.raises(FillerFailed, match="step 1's entries.4.content"):
        with_data("{{step1.entries.4.content}}", outputs)
    with pytest.raises(FillerFailed, match="step 2, which produced nothing"):
        with_data("{{step2.content}}", outputs)
    assert has_fillers({"files": [{"content": "${FILLER: x {{step1.content}}}"}]}) and not has_fillers({"content": "{{step1.content}}"})


def test_a_runtime_recorded_before_fillers_existed_replays_without_them() -> None:
    assert recorded_runtime({"mode": "online"}).fillers is False and recorded_runtime(None).fillers is False
    assert recorded_runtime(RuntimeConfig().to_json()).fillers is True


def test_the_intent_reply_keeps_known_names_in_order_once_and_names_the_rest() -> None:
    known = ["get_now", "read_files", "find_files"]
    assert read_tools('sure: {"tools": ["find_files", "read_files", "find_files", "fly"]}', known) == \
        (("find_files", "read_files"), "not in the catalogue: fly")
    assert read_tools("get_now", known) == ((), "the reply holds no JSON object")
    assert read_tools('{"tool": "get_now"}', known) == ((), 'the reply has no "tools" list')


def test_a_recovery_that_copies_back_a_step_that_ran_does_not_run_it_again() -> None:
    # The 1.5B's recovery reply: the step that had run, with its output, and an answer.
    reply = ('```json\n{"steps": [{"step": 1, "executor": "find_files", "output": {"ok": true, "entries": []}}],'
             ' "answer": "The move did not succeed."}\n```')
    assert read_plan(reply) == {"steps": [], "answer": "The move did not succeed."}
    assert read_plan('{"steps": [{"executor": "get_now"}], "answer": "x"}')["steps"] == [{"executor": "get_now", "args": {}}]


def test_the_intent_extractor_asks_under_a_grammar_of_the_listed_names() -> None:
    from metnos.mechanisms.llm.constraint import JsonConstraint
    from metnos.mechanisms.llm.messages import LLMReply
    from metnos.runtime.turn.intent_model import MAX_TOOLS, extract_intent

    sent = {}

    def ask(tier, messages, tools, **kw):
        sent.update(kw)
        return LLMReply(text='{"tools": ["find_files", "read_files"]}', tool_calls=(), model="m", call_form="none", raw={})

    found = extract_intent(lambda *a, **k: None, ask, tier="middle", request_text="read ~/a.md",
                           executors=[("read_files", "Read."), ("find_files", "Find.")])
    assert found.tools == ("find_files", "read_files") and found.problem is None
    constraint = sent["constraint"]
    assert isinstance(constraint, JsonConstraint)
    items = constraint.schema["properties"]["tools"]
    assert items["items"]["enum"] == ["read_files", "find_files"] and items["maxItems"] == MAX_TOOLS
    assert '"enum": ["read_files", "find_files"]' in constraint.grammar()
