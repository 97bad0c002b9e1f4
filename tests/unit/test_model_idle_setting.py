"""How long the shared model server stays warm: [model] idle_s, or METNOS_MODEL_IDLE_S."""

from __future__ import annotations

from pathlib import Path

import pytest

from metnos.mechanisms.llm.errors import LLMConfigError
from metnos.mechanisms.llm.shared_server import DEFAULT_IDLE_S, ENV_IDLE, idle_seconds


def test_default_config_and_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    assert idle_seconds(config, env={}) == DEFAULT_IDLE_S  # no file
    config.write_text("[model]\nidle_s = 30\n\n[llm.tiers.fast]\nprovider = 'embedded'\n")
    assert idle_seconds(config, env={}) == 30
    assert idle_seconds(config, env={ENV_IDLE: "0"}) == 0  # the environment wins


@pytest.mark.parametrize(("text", "env", "says"), [
    ("[model]\nidle_s = 'soon'\n", {}, "idle_s must be a number"),
    ("[model]\nidle_s = -1\n", {}, "between 0 and"),
    ("model = 3\n", {}, "[model] must be a table"),
    ("", {ENV_IDLE: "ten"}, f"{ENV_IDLE} must be a number"),
    ("[model\n", {}, "not valid TOML"),
])
def test_a_bad_setting_is_refused_with_its_place(tmp_path: Path, text: str, env: dict, says: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(LLMConfigError, match=None) as e:
        idle_seconds(config, env=env)
    assert says in str(e.value)
