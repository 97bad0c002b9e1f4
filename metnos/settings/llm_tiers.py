"""The four LLM tiers (seeds/002 ch. 4) from ``config.toml``, with aliasing and overrides.

    [llm.tiers.fast]
    provider = "openai"            # "openai" (llama-server, Ollama, vLLM), "anthropic", "embedded"
    url = "http://127.0.0.1:8080"  # the server's base; a trailing /v1 is fine
    model = "qwen3"
    timeout_s = 120
    max_tokens = 1024
    temperature = 0.0
    api_key_env = "MY_KEY_VAR"     # the NAME of the variable holding the key, never the key
    extra = { chat_template_kwargs = { enable_thinking = false } }   # merged into each request body
    reasoning = false              # thinking on or off (openai: chat_template_kwargs.enable_thinking; anthropic: thinking)

    [llm.tiers.frontier]
    provider = "anthropic"
    model = "claude-opus-4-7"

Aliasing, when a tier is not configured:
- it takes the nearest lower configured tier (wise -> middle -> fast; frontier -> wise -> ...);
- a local tier (fast, middle, wise) with nothing configured below it takes the nearest
  higher configured *local* tier, but never frontier: the frontier is the one tier
  that may leave the machine, and only when asked for by name, so it never stands in
  for a local tier;
- with no local tier configured at all, every unconfigured tier is the embedded model.

The embedded model (every tier with provider "embedded", the default) is the
0.5B unless chosen otherwise: ``model`` in ``[llm]``, or ``model_path`` in one
tier, is a size (``"0.5b"``, ``"1.5b"``, as ``metnos model install --size``
installs them) or the path of any GGUF file; ``METNOS_MODEL`` (which
``metnos ask --model`` sets) overrides both.

    [llm]
    model = "1.5b"                 # or "~/models/my-model.Q4_K_M.gguf"

Overrides (environment): ``METNOS_LLM_URL`` points every tier at one server
(provider ``METNOS_LLM_PROVIDER``, default "openai"; model ``METNOS_LLM_MODEL``,
default "default"), keeping each tier's timeout, token budget and temperature.
``METNOS_LLM_MODEL`` alone renames the model of every tier. ``METNOS_LLM_TIMEOUT``
(seconds) bounds the wait for a reply on every tier.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from metnos.mechanisms.llm.errors import LLMConfigError
from metnos.settings import http_url

TIERS: tuple[str, ...] = ("fast", "middle", "wise", "frontier")
LOCAL_TIERS: tuple[str, ...] = ("fast", "middle", "wise")

# The tier each role asks (seeds/002 ch. 4): the proposer and the online planner on wise,
# the intent extractor and the LLM judge on middle, fillers and the scratchpad summariser on fast.
ROLE_TIERS: dict[str, str] = {"proposer": "wise", "online": "wise", "recovery": "wise", "intent": "middle", "judge": "middle",
                              "filler": "fast", "summariser": "fast"}

ENV_URL = "METNOS_LLM_URL"
ENV_MODEL = "METNOS_LLM_MODEL"
ENV_PROVIDER = "METNOS_LLM_PROVIDER"
ENV_TIMEOUT = "METNOS_LLM_TIMEOUT"
ENV_EMBEDDED_MODEL = "METNOS_MODEL"

ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"


class TierConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["openai", "anthropic", "embedded"]
    url: str | None = None
    model: str = "default"
    timeout_s: float = Field(default=120.0, gt=0, le=3600)
    max_tokens: int = Field(default=1024, gt=0, le=1_000_000)
    temperature: float = Field(default=0.0, ge=0, le=2)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    model_path: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    # None: the server's default. On or off, said in the provider's own words (metnos.mechanisms.llm.provider).
    reasoning: bool | None = None
    # Planner calls held to a grammar of the offered tools where the server takes one
    # (llama.cpp: the embedded model, or a server whose /props says so); off: never sent.
    constrained: bool = True

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        return None if v is None else http_url(v)

    @model_validator(mode="after")
    def _url_when_needed(self) -> TierConfig:
        if self.provider == "openai" and not self.url:
            raise ValueError("provider 'openai' needs a url (the server's base, e.g. http://127.0.0.1:8080)")
        return self

    @property
    def effective_url(self) -> str | None:
        if self.provider == "anthropic" and not self.url:
            return ANTHROPIC_URL
        return self.url

    @property
    def effective_api_key_env(self) -> str | None:
        if self.provider == "anthropic" and not self.api_key_env:
            return ANTHROPIC_KEY_ENV
        return self.api_key_env


EMBEDDED_DEFAULT = TierConfig(provider="embedded", model="qwen2.5-coder-0.5b-instruct", max_tokens=512)


@dataclass(frozen=True)
class ResolvedTier:
    name: str
    config: TierConfig
    source: str  # "config", "alias of <tier>", "default (embedded)", "environment"

    def describe(self) -> str:
        c = self.config
        where = c.effective_url or (c.model_path or "built-in model")
        return f"{self.name}: {c.provider} {c.model} at {where} ({self.source})"


@dataclass(frozen=True)
class LLMSettings:
    tiers: dict[str, ResolvedTier]

    def tier(self, name: str) -> ResolvedTier:
        try:
            return self.tiers[name]
        except KeyError:
            raise LLMConfigError(f"unknown LLM tier {name!r} (tiers: {', '.join(TIERS)})") from None

    def describe(self) -> list[str]:
        return [self.tiers[t].describe() for t in TIERS]


def load_llm_settings(config_file: Path | None, env: Mapping[str, str] | None = None) -> LLMSettings:
    """Read [llm.tiers.*] from ``config_file`` (missing file: all defaults) and apply env overrides."""
    data: dict[str, Any] = {}
    if config_file is not None and config_file.exists():
        try:
            data = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise LLMConfigError(f"{config_file}: not valid TOML: {e}") from None
    return settings_from_mapping(data, env, source=str(config_file or "config"))


def settings_from_mapping(data: Mapping[str, Any], env: Mapping[str, str] | None = None, *, source: str = "config") -> LLMSettings:
    import os

    env = os.environ if env is None else env
    configured = _parse_tiers(data, source)
    resolved = _alias(configured)
    llm = data.get("llm") or {}
    choice = (env.get(ENV_EMBEDDED_MODEL) or "").strip() or llm.get("model")
    if choice is not None and (not isinstance(choice, str) or not choice.strip()):
        raise LLMConfigError(f"{source}: [llm] model must be a size like \"1.5b\" or the path of a .gguf file")
    return LLMSettings(_apply_env(_choose_embedded(resolved, choice, forced=bool(env.get(ENV_EMBEDDED_MODEL))), env))


def _choose_embedded(tiers: dict[str, ResolvedTier], choice: str | None, *, forced: bool) -> dict[str, ResolvedTier]:
    """Give the embedded tiers the chosen model; a tier's own model_path wins unless the environment chose."""
    if not choice:
        return tiers
    out = {}
    for name, tier in tiers.items():
        c = tier.config
        if c.provider == "embedded" and (forced or not c.model_path):
            tier = ResolvedTier(name, c.model_copy(update={"model_path": choice.strip()}), tier.source)
        out[name] = tier
    return out


def _parse_tiers(data: Mapping[str, Any], source: str) -> dict[str, TierConfig]:
    llm = data.get("llm", {})
    if not isinstance(llm, Mapping):
        raise LLMConfigError(f"{source}: [llm] must be a table")
    unknown_keys = set(llm) - {"tiers", "model"}
    if unknown_keys:
        raise LLMConfigError(f"{source}: [llm] has unknown keys {sorted(unknown_keys)} (only model and [llm.tiers.*])")
    tiers = llm.get("tiers", {})
    if not isinstance(tiers, Mapping):
        raise LLMConfigError(f"{source}: [llm.tiers] must be a table of tiers")
    out: dict[str, TierConfig] = {}
    for name, body in tiers.items():
        if name not in TIERS:
            raise LLMConfigError(f"{source}: [llm.tiers.{name}] is not a tier (tiers: {', '.join(TIERS)})")
        if not isinstance(body, Mapping):
            raise LLMConfigError(f"{source}: [llm.tiers.{name}] must be a table")
        try:
            out[name] = TierConfig.model_validate(dict(body))
        except ValidationError as e:
            raise LLMConfigError(f"{source}: [llm.tiers.{name}]: {_first_problem(e)}") from None
    return out


def _first_problem(e: ValidationError) -> str:
    problems = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        problems.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(problems)


def _alias(configured: dict[str, TierConfig]) -> dict[str, ResolvedTier]:
    out: dict[str, ResolvedTier] = {}
    for i, name in enumerate(TIERS):
        if name in configured:
            out[name] = ResolvedTier(name, configured[name], "config")
            continue
        lower = [t for t in reversed(TIERS[:i]) if t in configured]
        higher = [t for t in TIERS[i + 1 :] if t in configured and t in LOCAL_TIERS]
        pick = (lower or higher or [None])[0]
        if pick is None:
            out[name] = ResolvedTier(name, EMBEDDED_DEFAULT, "default (embedded)")
        else:
            out[name] = ResolvedTier(name, configured[pick], f"alias of {pick}")
    return out


def _apply_env(tiers: dict[str, ResolvedTier], env: Mapping[str, str]) -> dict[str, ResolvedTier]:
    url = (env.get(ENV_URL) or "").strip()
    model = (env.get(ENV_MODEL) or "").strip()
    provider = (env.get(ENV_PROVIDER) or "").strip() or "openai"
    tiers = _apply_timeout(tiers, env)
    if not url and not model:
        return tiers
    out: dict[str, ResolvedTier] = {}
    for name, tier in tiers.items():
        c = tier.config
        if url:
            fields = {
                "provider": provider,
                "url": url,
                "model": model or "default",
                "timeout_s": c.timeout_s,
                "max_tokens": c.max_tokens,
                "temperature": c.temperature,
            }
            label = f"environment ({ENV_URL})"
        else:
            fields = {**c.model_dump(), "model": model}
            label = f"{tier.source}, model from {ENV_MODEL}"
        try:
            out[name] = ResolvedTier(name, TierConfig.model_validate(fields), label)
        except ValidationError as e:
            raise LLMConfigError(f"{ENV_URL}/{ENV_PROVIDER}/{ENV_MODEL}: {_first_problem(e)}") from None
    return out


def _apply_timeout(tiers: dict[str, ResolvedTier], env: Mapping[str, str]) -> dict[str, ResolvedTier]:
    raw = (env.get(ENV_TIMEOUT) or "").strip()
    if not raw:
        return tiers
    try:
        return {
            name: ResolvedTier(name, TierConfig.model_validate({**t.config.model_dump(), "timeout_s": raw}), t.source)
            for name, t in tiers.items()
        }
    except ValidationError as e:
        raise LLMConfigError(f"{ENV_TIMEOUT}={raw!r}: {_first_problem(e)}") from None


def tier_ladder(settings: LLMSettings, *, with_frontier: bool = False) -> list[str]:
    """The tiers a failing proposer may climb, lowest first: each local tier whose model differs
    from the one below it (an aliased tier adds nothing), and the frontier only when asked for."""
    ladder: list[str] = []
    seen: set[tuple[Any, ...]] = set()
    for name in (*LOCAL_TIERS, *(("frontier",) if with_frontier else ())):
        c = settings.tier(name).config
        key = (c.provider, c.effective_url, c.model, c.model_path)
        if key not in seen:
            seen.add(key)
            ladder.append(name)
    return ladder

