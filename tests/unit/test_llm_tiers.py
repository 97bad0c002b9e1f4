from __future__ import annotations

from pathlib import Path

import pytest

from metnos.mechanisms.llm.errors import LLMConfigError
from metnos.settings.config_file import load_llm_settings
from metnos.settings.llm_tiers import settings_from_mapping


def tiers(**named: dict) -> dict:
    return {"llm": {"tiers": named}}


LOCAL = {"provider": "openai", "url": "http://127.0.0.1:8080", "model": "qwen"}
CLOUD = {"provider": "anthropic", "model": "claude-opus-4-7"}


def test_nothing_configured_means_the_embedded_model_everywhere() -> None:
    s = settings_from_mapping({}, {})
    for name in ("fast", "middle", "wise", "frontier"):
        assert s.tier(name).config.provider == "embedded"
        assert s.tier(name).source == "default (embedded)"


def test_missing_tiers_alias_to_the_nearest_lower_one() -> None:
    s = settings_from_mapping(tiers(fast=LOCAL, wise={**LOCAL, "model": "big", "max_tokens": 4096}), {})
    assert s.tier("middle").config.model == "qwen" and s.tier("middle").source == "alias of fast"
    assert s.tier("wise").config.model == "big" and s.tier("wise").source == "config"
    assert s.tier("frontier").config.model == "big" and s.tier("frontier").source == "alias of wise"


def test_with_nothing_lower_a_local_tier_takes_the_nearest_higher_local_one() -> None:
    s = settings_from_mapping(tiers(wise=LOCAL), {})
    assert s.tier("fast").source == "alias of wise"
    assert s.tier("middle").source == "alias of wise"


def test_a_local_tier_never_aliases_to_the_frontier() -> None:
    s = settings_from_mapping(tiers(frontier=CLOUD), {})
    assert s.tier("frontier").config.provider == "anthropic"
    for name in ("fast", "middle", "wise"):
        assert s.tier(name).config.provider == "embedded", name


def test_anthropic_defaults_url_and_key_variable() -> None:
    c = settings_from_mapping(tiers(frontier=CLOUD), {}).tier("frontier").config
    assert c.effective_url == "https://api.anthropic.com"
    assert c.effective_api_key_env == "ANTHROPIC_API_KEY"


def test_env_url_overrides_every_tier_and_keeps_budgets() -> None:
    s = settings_from_mapping(
        tiers(fast={**LOCAL, "max_tokens": 99, "extra": {"think": False}}, frontier=CLOUD),
        {"METNOS_LLM_URL": "http://127.0.0.1:9999/v1", "METNOS_LLM_MODEL": "m2"},
    )
    for name in ("fast", "middle", "wise", "frontier"):
        c = s.tier(name).config
        assert (c.provider, c.url, c.model) == ("openai", "http://127.0.0.1:9999/v1", "m2"), name
        assert s.tier(name).source.startswith("environment")
    assert s.tier("fast").config.max_tokens == 99
    assert s.tier("fast").config.extra == {}


def test_env_provider_can_pick_anthropic() -> None:
    s = settings_from_mapping({}, {"METNOS_LLM_URL": "http://127.0.0.1:9999", "METNOS_LLM_PROVIDER": "anthropic"})
    assert s.tier("wise").config.provider == "anthropic"


def test_env_model_alone_renames_the_model() -> None:
    s = settings_from_mapping(tiers(fast=LOCAL), {"METNOS_LLM_MODEL": "other"})
    assert s.tier("middle").config.model == "other"
    assert s.tier("middle").config.url == LOCAL["url"]


@pytest.mark.parametrize(
    ("data", "env", "needle"),
    [
        (tiers(fast={"provider": "openai"}), {}, "[llm.tiers.fast]: provider 'openai' needs a url"),
        (tiers(fast={**LOCAL, "url": "127.0.0.1:8080"}), {}, "url: must be an http(s) URL"),
        (tiers(fast={**LOCAL, "timeout_s": 0}), {}, "timeout_s"),
        (tiers(fast={**LOCAL, "colour": "red"}), {}, "colour"),
        (tiers(fast={**LOCAL, "provider": "gemini"}), {}, "provider"),
        (tiers(fast={**LOCAL, "api_key_env": "sk-abc def"}), {}, "api_key_env"),
        (tiers(turbo=LOCAL), {}, "[llm.tiers.turbo] is not a tier"),
        ({"llm": {"tier": {}}}, {}, "unknown keys"),
        ({}, {"METNOS_LLM_URL": "not a url"}, "METNOS_LLM_URL"),
        ({}, {"METNOS_LLM_URL": "http://127.0.0.1:1", "METNOS_LLM_PROVIDER": "bogus"}, "provider"),
    ],
)
def test_bad_config_is_one_clear_error(data: dict, env: dict, needle: str) -> None:
    with pytest.raises(LLMConfigError) as e:
        settings_from_mapping(data, env)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_unknown_tier_name_is_a_config_error() -> None:
    with pytest.raises(LLMConfigError, match="unknown LLM tier 'huge'"):
        settings_from_mapping({}, {}).tier("huge")


def test_reads_the_toml_file(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text('[llm.tiers.middle]\nprovider = "openai"\nurl = "http://127.0.0.1:11434/v1"\nmodel = "qwen2.5"\n')
    s = load_llm_settings(f, {})
    assert s.tier("fast").config.model == "qwen2.5" and s.tier("fast").source == "alias of middle"
    assert len(s.describe()) == 4


def test_broken_toml_is_a_config_error(tmp_path: Path) -> None:
    f = tmp_path / "config.toml"
    f.write_text("[llm.tiers.fast\nprovider=")
    with pytest.raises(LLMConfigError, match="not valid TOML"):
        load_llm_settings(f, {})


def test_missing_file_is_all_defaults(tmp_path: Path) -> None:
    assert load_llm_settings(tmp_path / "nope.toml", {}).tier("wise").config.provider == "embedded"
