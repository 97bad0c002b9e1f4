"""config.toml as a whole: every section checked at the start of a command, each error naming its key.

Each section keeps its own loader where it is used (``[llm]`` in
metnos.settings.llm_tiers, ``[model]`` in metnos.mechanisms.llm.shared_server, ``[network]`` in
metnos.mechanisms.sandbox.netallow, ``[telegram]`` in metnos.settings.telegram);
the sections that had none are pydantic models here: ``[turn]`` (the caps,
the judge's threshold, the pool, the scratchpad; a METNOS_* variable still
wins over them) and ``[daemon]`` (where it listens, how long an approval
waits). :func:`check_config` runs every loader, refuses a section it does not
know, and returns what is in force, for ``metnos config show``.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metnos.settings.http_address import DEFAULT_HTTP
from domain.errors import MetnosError


class ConfigError(MetnosError):
    """config.toml is not valid TOML, or a key in it is unknown or wrong; the message names the key."""


class DaemonConfig(BaseModel):
    """``[daemon]``: the long-running process (docs/daemon.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    http: str = DEFAULT_HTTP
    approval_timeout_s: float = Field(default=300.0, gt=0, le=86400, allow_inf_nan=False)

    @field_validator("http")
    @classmethod
    def _address(cls, v: str) -> str:
        from metnos.settings.http_address import HttpAddressError, parse_address

        try:
            parse_address(v)
        except HttpAddressError as e:
            raise ValueError(str(e)) from None
        return v


class TurnConfig(BaseModel):
    """``[turn]``: the turn's tunables (seeds/002 ch. 9-10); the ranges are TurnSettings' own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pool_size: int | None = None
    judge_threshold: float | None = None
    cap_steps: int | None = None
    cap_same_executor: int | None = None
    cap_same_vectorial: int | None = None
    scratchpad_threshold_bytes: int | None = None
    opening_reads: bool | None = None
    offer: str | None = None

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def read_config(config_file: Path | None) -> dict[str, Any]:
    """The parsed file; a missing file is an empty config."""
    if config_file is None or not config_file.is_file():
        return {}
    try:
        return tomllib.loads(config_file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{config_file}: not valid TOML: {e}") from None


def _section(model: type[BaseModel], name: str, data: Mapping[str, Any], where: str) -> Any:
    section = data.get(name, {})
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: [{name}] must be a table")
    try:
        return model.model_validate(dict(section))
    except ValidationError as e:
        first = e.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        reason = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            # The table the unknown key is in: a sub-table's own keys, not the section's.
            table: Any = model
            for part in first["loc"][:-1]:
                field = table.model_fields.get(str(part)) if isinstance(table, type) and issubclass(table, BaseModel) else None
                table = field.annotation if field is not None else None
            known = list(table.model_fields) if isinstance(table, type) and issubclass(table, BaseModel) else []
            close = difflib.get_close_matches(str(first["loc"][-1]), known, n=1, cutoff=0.7)
            reason = f"unknown key (known: {', '.join(known)})" + (f"; did you mean {close[0]}?" if close else "")
        raise ConfigError(f"{where}: [{name}] {key}: {reason}") from None


def validate_section(model: type[BaseModel], name: str, section: Any, where: str) -> Any:
    """``section`` (the table ``[name]`` as read, with anything set over it) as ``model``;
    a ConfigError names a wrong key, as for config.toml itself."""
    return _section(model, name, {name: section}, where)


def load_section(model: type[BaseModel], name: str, config_file: Path | None) -> Any:
    """``[name]`` of ``config_file`` as ``model`` (defaults when absent); a ConfigError names a wrong key."""
    return _section(model, name, read_config(config_file), str(config_file))


def load_daemon_config(config_file: Path | None) -> DaemonConfig:
    return _section(DaemonConfig, "daemon", read_config(config_file), str(config_file))


def load_turn_config(config_file: Path | None) -> dict[str, Any]:
    """The ``[turn]`` values the file sets, each checked against the turn's own bounds."""
    from metnos.settings.turn import SettingsError, TurnSettings

    given = _section(TurnConfig, "turn", read_config(config_file), str(config_file)).given()
    try:
        TurnSettings(**given)
    except SettingsError as e:
        raise ConfigError(f"{config_file}: [turn] {e.variable}: {e.reason}, not {e.value}") from None
    return given


def _llm(config_file: Path, env: Mapping[str, str]) -> Any:
    from metnos.settings.llm_tiers import load_llm_settings

    settings = load_llm_settings(config_file, env)
    return {name: {"provider": t.config.provider, "model": t.config.model, "url": t.config.effective_url,
                   "model_path": t.config.model_path, "source": t.source} for name, t in settings.tiers.items()}


def _model(config_file: Path, env: Mapping[str, str]) -> Any:
    from metnos.mechanisms.llm.shared_server import idle_seconds

    return {"idle_s": idle_seconds(config_file, env)}


def _network(config_file: Path, env: Mapping[str, str]) -> Any:
    from metnos.mechanisms.sandbox.netallow import load_allow

    return {"allow": list(load_allow(config_file))}


def _telegram(config_file: Path, env: Mapping[str, str]) -> Any:
    from metnos.settings.telegram import load_telegram_settings

    t = load_telegram_settings(config_file)
    # The token's variable is named, never read here: config show must not print a secret.
    return {"token_env": t.token_env, "allowed_chats": sorted(t.allowed_chats), "chat_ids": dict(t.chat_ids),
            "base_url": t.base_url, "approval_timeout_s": t.approval_timeout_s}


def _daemon(config_file: Path, env: Mapping[str, str]) -> Any:
    return load_daemon_config(config_file).model_dump()


def _runtime(config_file: Path, env: Mapping[str, str]) -> Any:
    from metnos.settings.runtime import load_runtime_config

    return load_runtime_config(config_file).to_json()


def _turn(config_file: Path, env: Mapping[str, str]) -> Any:
    from metnos.settings import load_settings
    from metnos.settings.turn import ENV_OF_SETTING

    given = load_turn_config(config_file)
    in_force = load_settings(env).turn().to_json()
    return {key: {"value": value, "from": "environment" if env.get(ENV_OF_SETTING[key], "").strip() else ("config" if key in given else "default")}
            for key, value in in_force.items()}


# Every section config.toml may hold, and what reads it.
SECTIONS: dict[str, Callable[[Path, Mapping[str, str]], Any]] = {
    "llm": _llm, "model": _model, "network": _network, "telegram": _telegram, "daemon": _daemon, "turn": _turn,
    "runtime": _runtime,
}


def check_config(config_file: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """Every section checked (an error names its key) and what is in force, section by section."""
    data = read_config(config_file)
    for name in data:
        if name not in SECTIONS:
            close = difflib.get_close_matches(name, list(SECTIONS), n=1, cutoff=0.6)
            hint = f"; did you mean [{close[0]}]?" if close else ""
            raise ConfigError(f"{config_file}: [{name}]: unknown section (sections: {', '.join(SECTIONS)}){hint}")
    in_force = {}
    for name, read in SECTIONS.items():
        try:
            in_force[name] = read(config_file, env)
        except ConfigError:
            raise
        except MetnosError as e:
            raise ConfigError(str(e)) from None
    return in_force
