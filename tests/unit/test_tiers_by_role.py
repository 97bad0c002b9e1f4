"""Tiers by role (issue 20 item 2): the ladder a failing proposer climbs, reasoning in each provider's words."""

from __future__ import annotations

from metnos.llm.provider import request_extra
from metnos.llm.tiers import ROLE_TIERS, TierConfig, settings_from_mapping, tier_ladder
from metnos.turn.online import answer_segments, read_plan, shift
from metnos.turn.runtime_config import RuntimeConfig


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
