"""Which GGUF the embedded tiers serve: [llm] model, a tier's model_path, METNOS_MODEL."""

from __future__ import annotations

import pytest

from metnos.mechanisms.llm.errors import LLMConfigError
from metnos.settings.llm_tiers import settings_from_mapping


def paths(settings) -> dict[str, str | None]:
    return {name: t.config.model_path for name, t in settings.tiers.items()}


def test_nothing_chosen_leaves_the_default_model() -> None:
    assert set(paths(settings_from_mapping({}, {})).values()) == {None}


def test_llm_model_in_the_config_reaches_every_embedded_tier() -> None:
    s = settings_from_mapping({"llm": {"model": "1.5b"}}, {})
    assert set(paths(s).values()) == {"1.5b"}


def test_a_tier_of_its_own_keeps_its_path_and_a_remote_tier_gets_none() -> None:
    data = {"llm": {"model": "1.5b", "tiers": {
        "fast": {"provider": "embedded", "model_path": "/m/small.gguf"},
        "wise": {"provider": "openai", "url": "http://127.0.0.1:9"}}}}
    p = paths(settings_from_mapping(data, {}))
    assert p["fast"] == "/m/small.gguf" and p["middle"] == "/m/small.gguf"  # middle aliases fast
    assert p["wise"] is None


def test_the_environment_wins_over_config_and_tiers() -> None:
    data = {"llm": {"model": "1.5b", "tiers": {"fast": {"provider": "embedded", "model_path": "/m/small.gguf"}}}}
    p = paths(settings_from_mapping(data, {"METNOS_MODEL": "/m/any.gguf"}))
    assert set(p.values()) == {"/m/any.gguf"}


def test_a_model_that_is_not_text_is_refused_with_its_place() -> None:
    with pytest.raises(LLMConfigError, match=r"\[llm\] model"):
        settings_from_mapping({"llm": {"model": 15}}, {})
    with pytest.raises(LLMConfigError, match="unknown keys"):
        settings_from_mapping({"llm": {"modle": "1.5b"}}, {})
