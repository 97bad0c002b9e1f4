"""config.toml as a whole, for ``metnos config check|show``, and a section read from a given file.

:func:`check_config` loads every setting (each error naming its key) and returns what is in force,
section by section, as ``metnos config show --json`` has always printed it; :func:`effective` lists
every setting with where its value came from, secrets hidden. The ``load_*`` helpers read one
section of a file a caller names (a test, a tool) through the same loader and the same checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from domain.errors import MetnosError
from metnos.settings.daemon import DaemonConfig
from metnos.settings.declare import PRECEDENCE
from metnos.settings.errors import ConfigError, LLMConfigError
from metnos.settings.llm_tiers import LLMSettings
from metnos.settings.loader import DEFAULT, LEAVES, Loaded, load
from metnos.settings.runtime import RuntimeConfig, runtime_for_turn
from metnos.settings.telegram import TelegramSettings
from metnos.settings.toml_file import read_toml
from metnos.settings.turn import TurnSettings

__all__ = ["PRECEDENCE", "ConfigError", "check_config", "effective", "in_force_sections", "load_daemon_config",
           "load_llm_settings", "load_runtime_config", "load_telegram_settings", "read_config"]

HIDDEN = "(set, hidden)"
read_config = read_toml


def _load_file(config_file: Path | None, env: Mapping[str, str] | None = None) -> Loaded:
    return load(env, config_file=config_file)


def load_llm_settings(config_file: Path | None, env: Mapping[str, str] | None = None) -> LLMSettings:
    try:
        return _load_file(config_file, env).llm()
    except ConfigError as e:
        # A file that is not TOML at all is, to the LLM layer, its configuration error.
        raise LLMConfigError(str(e)) from None


def load_telegram_settings(config_file: Path | None) -> TelegramSettings:
    return _load_file(config_file).settings.telegram


def load_daemon_config(config_file: Path | None) -> DaemonConfig:
    return _load_file(config_file).settings.daemon


def load_runtime_config(config_file: Path | None, overrides: tuple[str, ...] | list[str] = ()) -> RuntimeConfig:
    return runtime_for_turn(_load_file(config_file).settings.runtime, overrides, where=str(config_file or "config.toml"))


def load_turn_config(config_file: Path | None) -> TurnSettings:
    return _load_file(config_file).settings.turn


def in_force_sections(loaded: Loaded) -> dict[str, Any]:
    """What is in force, section by section, in the shape ``config show --json`` prints under "sections"."""
    s = loaded.settings
    tiers = loaded.llm().tiers
    turn_from = {DEFAULT: "default", str(loaded.config_file): "config"}
    return {
        "llm": {name: {"provider": t.config.provider, "model": t.config.model, "url": t.config.effective_url,
                       "model_path": t.config.model_path, "source": t.source} for name, t in tiers.items()},
        "model": {"idle_s": s.model.idle_s},
        "network": {"allow": list(s.network.allow)},
        # The token's variable is named, never read here: config show must not print a secret.
        "telegram": {"token_env": s.telegram.token_env, "allowed_chats": sorted(s.telegram.allowed_chats),
                     "chat_ids": dict(s.telegram.chat_ids), "base_url": s.telegram.base_url,
                     "approval_timeout_s": s.telegram.approval_timeout_s},
        "daemon": s.daemon.model_dump(),
        "turn": {key: {"value": value, "from": turn_from.get(loaded.source(f"turn.{key}"), "environment")}
                 for key, value in s.turn.to_json().items()},
        "runtime": s.runtime.to_json(),
        # Which programs run_commands may start: worth seeing at a glance, "free" above all.
        "commands": s.commands.model_dump(mode="json"),
    }


def check_config(config_file: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """Every setting checked (an error names its key) and what is in force, section by section."""
    try:
        return in_force_sections(load(env) if config_file is None else _load_file(config_file, env))
    except ConfigError:
        raise
    except MetnosError as e:
        # One class for `config check`, whatever section's own error named the key.
        raise ConfigError(str(e)) from None


def effective(loaded: Loaded) -> list[dict[str, Any]]:
    """Every setting in force: its key, its value (a secret's never), and where it came from."""
    rows = []
    for leaf in LEAVES:
        at: Any = loaded.settings
        for part in leaf.path:
            at = getattr(at, part)
        value = _plain(at)
        if leaf.secret and value not in (None, {}, ""):
            value = sorted(value) if isinstance(value, dict) else HIDDEN  # a store variable's name, never its value
        source = loaded.source(leaf.key)
        if source == DEFAULT and leaf.env and not leaf.in_toml:
            source = f"{DEFAULT} (set by {leaf.env} only)"
        rows.append({"key": leaf.key, "value": value, "from": source, "toml": leaf.in_toml})
    return rows


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (tuple, frozenset, set)):
        return sorted(value) if isinstance(value, (frozenset, set)) else list(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value

