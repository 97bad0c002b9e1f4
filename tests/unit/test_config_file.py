"""Issue 21 item 5: config.toml checked as a whole, each error naming its key (real files on disk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.errors import MetnosError

from metnos.settings.config_file import ConfigError, check_config, load_daemon_config
from metnos.settings import load_settings


def write(tmp_path: Path, text: str) -> Path:
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)
    return config


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"METNOS_HOME": str(tmp_path), "HOME": str(tmp_path / "user"), **extra}


@pytest.mark.parametrize(("text", "named"), [
    ("[turn]\ncap_step = 5\n", "[turn] cap_step: unknown key"),
    ("[turn]\ncap_steps = 0\n", "[turn] cap_steps: must be an integer in [1, 1000], not 0"),
    ("[turn]\njudge_threshold = 1.5\n", "[turn] judge_threshold: must be a number in [0.0, 1.0]"),
    ("[turn]\ncap_steps = \"many\"\n", "[turn] cap_steps:"),
    ("[daemon]\nhttp = \"nope\"\n", "[daemon] http: the HTTP address must be HOST:PORT"),
    ("[daemon]\nhttp = \"127.0.0.1:70000\"\n", "[daemon] http:"),
    ("[daemon]\napproval_timeout_s = -1\n", "[daemon] approval_timeout_s:"),
    ("[daemon]\nport = 1\n", "[daemon] port: unknown key"),
    ("[deamon]\nhttp = \"127.0.0.1:1\"\n", "[deamon]: unknown section"),
    ("daemon = 3\n", "[daemon] must be a table"),
    ("[network]\nallow = [\"not a host!\"]\n", "[network] allow"),
    ("[telegram]\nallowed_chats = [\"me\"]\n", "[telegram] allowed_chats"),
    ("[telegram]\ntoken = \"123:abc\"\n", "[telegram] token: the bot token never goes in config.toml"),
    ("[model]\nidle_s = \"long\"\n", "[model] idle_s"),
    ("[llm.tiers.fast]\nprovider = \"openai\"\n", "needs a url"),
    ("[llm]\nfoo = 1\n", "[llm] has unknown keys"),
    ("[turn\n", "not valid TOML"),
])
def test_each_wrong_key_is_named(tmp_path: Path, text: str, named: str) -> None:
    config = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        check_config(config, env_for(tmp_path))
    assert named in str(caught.value) and str(config) in str(caught.value)


@pytest.mark.parametrize(("text", "named"), [
    ("[turn]\ncap_steps = true\n", "[turn] cap_steps: must be a number, not true"),
    ("[daemon]\napproval_timeout_s = true\n", "[daemon] approval_timeout_s: must be a number, not true"),
    ("[telegram]\napproval_timeout_s = false\n", "[telegram] approval_timeout_s: must be a number, not false"),
    ("[model]\nidle_s = true\n", "[model] idle_s: must be a number, not true"),
    ("[runtime.judge]\nthreshold = true\n", "[runtime] judge.threshold: must be a number, not true"),
    ("[location]\nname = \"home\"\nlat = true\nlon = 1.0\n", "[location] lat: must be a number, not true"),
])
def test_a_bool_is_not_taken_for_a_number(tmp_path: Path, text: str, named: str) -> None:
    # Each section raises its own error (TelegramConfigError, LLMConfigError, ConfigError).
    # pydantic alone reads true as 1: a turn of one step, an approval that waits one second.
    config = write(tmp_path, text)
    with pytest.raises(MetnosError) as caught:
        check_config(config, env_for(tmp_path))
    assert named in str(caught.value) and str(config) in str(caught.value)
    with pytest.raises(MetnosError, match="must be a number"):
        load_settings(env_for(tmp_path))


def test_a_bool_setting_still_takes_a_bool(tmp_path: Path) -> None:
    write(tmp_path, "[turn]\nopening_reads = false\n[runtime]\nfillers = true\n")
    assert load_settings(env_for(tmp_path)).turn.opening_reads is False


def test_a_close_misspelling_is_suggested(tmp_path: Path) -> None:
    config = write(tmp_path, "[turn]\ncap_step = 5\n[deamon]\n")
    with pytest.raises(ConfigError, match=r"did you mean \[daemon\]"):
        check_config(config, env_for(tmp_path))
    config = write(tmp_path, "[turn]\ncap_step = 5\n")
    with pytest.raises(ConfigError, match="did you mean cap_steps"):
        check_config(config, env_for(tmp_path))


def test_every_section_is_in_force_and_an_absent_file_is_every_default(tmp_path: Path) -> None:
    sections = check_config(tmp_path / "config" / "config.toml", env_for(tmp_path))
    assert set(sections) == {"llm", "model", "network", "telegram", "daemon", "turn", "runtime", "commands"}
    assert sections["daemon"] == {"http": "127.0.0.1:8737", "approval_timeout_s": 300.0, "max_request_bytes": 1048576,
                                  "delivery_attempts": 10, "delivery_first_delay_s": 2.0, "delivery_max_delay_s": 300.0}
    assert sections["turn"]["cap_steps"] == {"value": 30, "from": "default"}


def test_turn_settings_come_from_the_file_and_a_variable_wins(tmp_path: Path) -> None:
    write(tmp_path, "[turn]\ncap_steps = 5\njudge_threshold = 0.5\n")
    assert load_settings(env_for(tmp_path)).turn.cap_steps == 5
    assert load_settings(env_for(tmp_path)).turn.judge_threshold == 0.5
    assert load_settings(env_for(tmp_path, METNOS_CAP_STEPS="7")).turn.cap_steps == 7
    sections = check_config(tmp_path / "config" / "config.toml", env_for(tmp_path, METNOS_CAP_STEPS="7"))
    assert sections["turn"]["cap_steps"] == {"value": 7, "from": "environment"}
    assert sections["turn"]["judge_threshold"] == {"value": 0.5, "from": "config"}


def test_the_daemon_section(tmp_path: Path) -> None:
    config = write(tmp_path, "[daemon]\nhttp = \"127.0.0.1:9999\"\napproval_timeout_s = 30\n")
    daemon = load_daemon_config(config)
    assert daemon.http == "127.0.0.1:9999" and daemon.approval_timeout_s == 30


def test_the_telegram_token_is_never_shown(tmp_path: Path) -> None:
    config = write(tmp_path, "[telegram]\ntoken_env = \"MY_BOT\"\nallowed_chats = [42]\n")
    sections = check_config(config, env_for(tmp_path, MY_BOT="123456:very-secret-token"))
    assert sections["telegram"]["token_env"] == "MY_BOT" and sections["telegram"]["allowed_chats"] == [42]
    assert "very-secret-token" not in repr(sections)
