"""Every METNOS_* setting, read and checked once, at the start of a command (pydantic-settings).

A variable that is present but malformed or out of range is an error naming the
variable, its value and what it should be; an absent or blank one means the
default. ``metnos`` checks the whole environment before it runs a command, so a
typo fails at once with one line instead of deep inside a turn or a replay.
The parts of Metnos that take an environment mapping (tests pass dicts) read
their values through :func:`load_settings` too.

``METNOS_SANDBOX`` is read by the sandbox itself (metnos/mechanisms/sandbox/bwrap.py).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from metnos.settings.turn import ENV_OF_SETTING, SettingsError, TurnSettings

PREFIX = "METNOS_"
# Read elsewhere, or by the test suite (METNOS_REQUIRE_*): never taken for a typo.
READ_ELSEWHERE = frozenset({"METNOS_SANDBOX", "METNOS_TELEGRAM_TOKEN"})
TEST_SUITE_PREFIX = "METNOS_REQUIRE_"

_DEFAULT_TURN = TurnSettings()


def http_url(v: str) -> str:
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"must be an http(s) URL like http://127.0.0.1:8080, not {v!r}")
    return v.rstrip("/")


class MetnosSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=PREFIX, case_sensitive=True, extra="ignore", frozen=True)

    HOME: str | None = None
    DEBUG: bool = False
    BIRTH_REUSE: bool = True
    SCHEDULER_CLOCK_FILE: str | None = None
    LLM_URL: str | None = None
    LLM_MODEL: str | None = None
    LLM_PROVIDER: Literal["openai", "anthropic", "embedded"] | None = None
    LLM_TIMEOUT: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)
    # The turn's tunables; their ranges are TurnSettings' own.
    ENGINE_POOL_SIZE: int = _DEFAULT_TURN.pool_size
    JUDGE_THRESHOLD: float = Field(default=_DEFAULT_TURN.judge_threshold, allow_inf_nan=False)
    CAP_STEPS: int = _DEFAULT_TURN.cap_steps
    CAP_SAME_EXECUTOR: int = _DEFAULT_TURN.cap_same_executor
    CAP_SAME_VECTORIAL: int = _DEFAULT_TURN.cap_same_vectorial
    SCRATCHPAD_THRESHOLD_BYTES: int = _DEFAULT_TURN.scratchpad_threshold_bytes
    # The cascade (metnos/runtime/cascade/consult.py reads them; docs/cascade.md).
    CASCADE_COSINE: float = Field(default=0.8, gt=0, le=1, allow_inf_nan=False)
    CASCADE_MIN_SUCCESSES: int = Field(default=2, ge=1)
    OPENING_READS: bool = _DEFAULT_TURN.opening_reads
    ENGINE_OFFER: str = _DEFAULT_TURN.offer

    @field_validator("LLM_URL")
    @classmethod
    def _llm_url(cls, v: str | None) -> str | None:
        return None if v is None else http_url(v)

    @model_validator(mode="after")
    def _turn_in_range(self) -> MetnosSettings:
        self.turn()
        return self

    def turn(self) -> TurnSettings:
        return TurnSettings(**{field: getattr(self, variable.removeprefix(PREFIX)) for field, variable in ENV_OF_SETTING.items()})


class _MappingSource(EnvSettingsSource):
    """The environment source of pydantic-settings, over a given mapping; blank means unset."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._mapping = {k: v.strip() for k, v in env.items() if k.startswith(PREFIX) and v.strip()}
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._mapping


def _turn_from_config(env: Mapping[str, str]) -> dict[str, object]:
    """``[turn]`` of the workspace's config.toml, by setting name: what a variable left unset falls back to."""
    from metnos.settings.config_file import load_turn_config
    from metnos.settings.workspace import Workspace

    given = load_turn_config(Workspace.from_env(dict(env)).config_file)
    return {ENV_OF_SETTING[key].removeprefix(PREFIX): value for key, value in given.items()}


def load_settings(env: Mapping[str, str] | None = None) -> MetnosSettings:
    """The settings in ``env`` (default ``os.environ``) over those of config.toml's ``[turn]``,
    or a :class:`SettingsError` naming the variable (a ConfigError naming the key)."""
    env = os.environ if env is None else env
    from_config = _turn_from_config(env)
    try:
        return MetnosSettings.model_validate({**from_config, **_MappingSource(MetnosSettings, env)()})
    except ValidationError as e:
        first = e.errors()[0]
        variable = PREFIX + str(first["loc"][0]) if first["loc"] else PREFIX
        reason = first["msg"].removeprefix("Value error, ")
        raise SettingsError(variable, env.get(variable, ""), reason) from None
    except SettingsError as e:
        variable = ENV_OF_SETTING.get(e.variable, e.variable)
        raise SettingsError(variable, env.get(variable, ""), e.reason) from None


def unknown_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """METNOS_* variables that look like a misspelt setting, each with the setting it resembles."""
    env = os.environ if env is None else env
    known = {PREFIX + name for name in MetnosSettings.model_fields} | READ_ELSEWHERE
    notes = []
    for name in sorted(k for k in env if k.startswith(PREFIX) and k not in known and not k.startswith(TEST_SUITE_PREFIX)):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        if close:
            notes.append(f"{name} is not a Metnos setting (did you mean {close[0]}?); it is ignored")
    return notes

