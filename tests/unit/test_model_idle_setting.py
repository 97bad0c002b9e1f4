"""How long the shared model server stays warm: [model] idle_s, or METNOS_MODEL_IDLE_S (read by the one loader)."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.errors import MetnosError
from metnos.mechanisms.llm.errors import LLMConfigError
from metnos.settings import SettingsError, load
from metnos.settings.model_server import DEFAULT_IDLE_S, ENV_IDLE


def idle(config: Path, env: dict) -> float:
    return load(env, config_file=config).settings.model.idle_s


def test_default_config_and_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    assert idle(config, {}) == DEFAULT_IDLE_S  # no file
    config.write_text("[model]\nidle_s = 30\n\n[llm.tiers.fast]\nprovider = 'embedded'\n")
    assert idle(config, {}) == 30
    assert idle(config, {ENV_IDLE: "0"}) == 0  # the environment wins


@pytest.mark.parametrize(("text", "env", "error", "says"), [
    ("[model]\nidle_s = 'soon'\n", {}, LLMConfigError, "[model] idle_s: Input should be a valid number"),
    ("[model]\nidle_s = -1\n", {}, LLMConfigError, "[model] idle_s: Input should be greater than or equal to 0"),
    ("model = 3\n", {}, LLMConfigError, "[model] must be a table"),
    ("", {ENV_IDLE: "ten"}, SettingsError, f"{ENV_IDLE}='ten' is invalid: Input should be a valid number"),
    ("[model\n", {}, MetnosError, "not valid TOML"),
])
def test_a_bad_setting_is_refused_with_its_place(tmp_path: Path, text: str, env: dict, error: type, says: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(error) as e:
        idle(config, env)
    assert says in str(e.value)
