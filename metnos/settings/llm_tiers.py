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
installs them), the path of any GGUF file, the name of one in the models
folder (as ``metnos model install --hf`` leaves it) or an Ollama model
(``"ollama:qwen2.5-coder:1.5b"``); ``METNOS_MODEL`` (which ``metnos ask --model``
sets) overrides both.

    [llm]
    model = "1.5b"                 # or "~/models/my-model.Q4_K_M.gguf"

Overrides (environment): ``METNOS_LLM_URL`` points every tier at one server
(provider ``METNOS_LLM_PROVIDER``, default "openai"; model ``METNOS_LLM_MODEL``,
default "default"), keeping each tier's timeout, token budget and temperature.
``METNOS_LLM_MODEL`` alone renames the model of every tier. ``METNOS_LLM_TIMEOUT``
(seconds) bounds the wait for a reply on every tier.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from metnos.settings.declare import leaves, setting
from metnos.settings.errors import LLMConfigError, first_problem
from metnos.settings.http_address import http_url
from metnos.settings.layers import env_layer, merge

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
Provider = Literal["openai", "anthropic", "embedded"]


class TierConfig(BaseModel):
    """``[llm.tiers.NAME]``: one tier's model and how to reach it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider = Field(description="openai (llama-server, Ollama, vLLM), anthropic, or embedded")
    url: str | None = Field(default=None, description="the server's base; a trailing /v1 is fine")
    model: str = Field(default="default", description="the model's name at the server")
    timeout_s: float = Field(default=120.0, gt=0, le=3600, description="seconds to wait for a reply")
    max_tokens: int = Field(default=1024, gt=0, le=1_000_000, description="the reply's token budget")
    temperature: float = Field(default=0.0, ge=0, le=2, description="sampling temperature (0-2)")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                    description="the NAME of the variable holding the key, never the key")
    model_path: str | None = Field(default=None, description="embedded: a size (0.5b, 1.5b), a GGUF file (a path, or a name in the "
                                                                 "models folder) or ollama:NAME[:TAG]")
    extra: dict[str, Any] = Field(default_factory=dict, description="merged into each request body")
    # None: the server's default. On or off, said in the provider's own words (metnos.mechanisms.llm.provider).
    reasoning: bool | None = Field(default=None, description="thinking on or off; unset: the server's default")
    # Planner calls held to a grammar of the offered tools where the server takes one
    # (llama.cpp: the embedded model, or a server whose /props says so); off: never sent.
    constrained: bool = Field(default=True, description="hold planner calls to a grammar of the offered tools where the server takes one")

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


class LLMConfig(BaseModel):
    """``[llm]``: the embedded model and the four tiers (seeds/002 ch. 4), with the environment's overrides."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = setting(None, "The embedded model: a size (`0.5b`, `1.5b`, as `metnos model install --size` "
                                      "installs them), the path of any GGUF file, the name of one in the models folder "
                                      "(`metnos model install --hf` puts it there) or an Ollama model (`ollama:NAME[:TAG]`); "
                                      "wins over a tier's `model_path` when set by the variable or the flag.",
                                env=ENV_EMBEDDED_MODEL, flag="--model", dest="model")
    tiers: dict[Literal["fast", "middle", "wise", "frontier"], TierConfig] = setting(
        description="`[llm.tiers.fast|middle|wise|frontier]`: provider, url, model, timeout_s, max_tokens, temperature, "
                    "api_key_env, model_path, extra, reasoning. An unconfigured tier is aliased (docs/turns.md).",
        default_factory=dict)
    override_url: str | None = setting(None, "Points every tier at one server, keeping each tier's timeout, token budget "
                                             "and temperature.", env=ENV_URL, toml=False)
    override_provider: Provider | None = setting(None, "The provider of that server (default openai).",
                                                 env=ENV_PROVIDER, toml=False)
    override_model: str | None = setting(None, "The model at that server (default `default`); alone, renames the model "
                                               "of every tier.", env=ENV_MODEL, toml=False)
    timeout_s: float | None = setting(None, "Seconds to wait for a reply, on every tier.", env=ENV_TIMEOUT, toml=False,
                                      gt=0, le=3600, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _tables(cls, data: Any) -> Any:
        # The messages config.toml's [llm] has always given, each naming its table.
        if not isinstance(data, Mapping):
            return data
        unknown_keys = set(data) - set(cls.model_fields)
        if unknown_keys:
            raise ValueError(f"[llm] has unknown keys {sorted(unknown_keys)} (only model and [llm.tiers.*])")
        tiers = data.get("tiers", {})
        if not isinstance(tiers, Mapping):
            raise ValueError("[llm.tiers] must be a table of tiers")  # noqa: TRY004 - pydantic reports a ValueError, not a TypeError
        checked: dict[str, TierConfig] = {}
        for name, body in tiers.items():
            if name not in TIERS:
                raise ValueError(f"[llm.tiers.{name}] is not a tier (tiers: {', '.join(TIERS)})")
            if isinstance(body, TierConfig):
                checked[name] = body
                continue
            if not isinstance(body, Mapping):
                raise ValueError(f"[llm.tiers.{name}] must be a table")  # noqa: TRY004 - pydantic reports a ValueError, not a TypeError
            try:
                checked[name] = TierConfig.model_validate(dict(body))
            except ValidationError as e:
                raise ValueError(f"[llm.tiers.{name}]: {first_problem(e.errors())}") from None
        return {**data, "tiers": checked}

    @field_validator("model")
    @classmethod
    def _a_model(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError('must be a size like "1.5b" or the path of a .gguf file')
        return None if v is None else v.strip()

    @field_validator("override_url")
    @classmethod
    def _override_url(cls, v: str | None) -> str | None:
        return None if v is None else http_url(v)


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


def resolve_tiers(llm: LLMConfig, *, model_forced: bool) -> LLMSettings:
    """The four tiers in force: aliasing, the embedded model chosen, the overrides applied.
    ``model_forced``: ``llm.model`` came from ``METNOS_MODEL`` or ``--model``, and so wins over a tier's own model_path."""
    resolved = _alias(dict(llm.tiers))
    return LLMSettings(_apply_overrides(_choose_embedded(resolved, llm.model, forced=model_forced), llm))


def settings_from_mapping(data: Mapping[str, Any], env: Mapping[str, str] | None = None, *, source: str = "config") -> LLMSettings:
    """The tiers of a parsed config.toml (``data``) with the ``METNOS_*`` overrides of ``env``; for a caller
    holding a table rather than the loaded settings (the loader reads the same way)."""
    table = data.get("llm", {})
    if not isinstance(table, Mapping):
        raise LLMConfigError(f"{source}: [llm] must be a table")
    from_env, variables = env_layer(leaves(LLMConfig), env or {})
    try:
        section = LLMConfig.model_validate(merge(table, from_env))
    except ValidationError as e:
        key = ".".join(str(p) for p in e.errors()[0]["loc"])
        variable = variables.get(key)
        if variable is not None:
            reason = str(e.errors()[0]["msg"]).removeprefix("Value error, ")
            raise LLMConfigError(f"{variable}={(env or {}).get(variable, '').strip()!r} is invalid (llm.{key}): {reason}") from None
        raise LLMConfigError(f"{source}: {_located(e)}") from None
    return resolve_tiers(section, model_forced=bool(from_env.get("model")))


def _located(e: ValidationError) -> str:
    err = e.errors()[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if msg.startswith("["):
        return msg
    return f"[llm] {'.'.join(str(p) for p in err['loc'])}: {msg}"


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


def _apply_overrides(tiers: dict[str, ResolvedTier], llm: LLMConfig) -> dict[str, ResolvedTier]:
    url = llm.override_url or ""
    model = llm.override_model or ""
    provider = llm.override_provider or "openai"
    tiers = _apply_timeout(tiers, llm.timeout_s)
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
            raise LLMConfigError(f"{ENV_URL}/{ENV_PROVIDER}/{ENV_MODEL}: {first_problem(e.errors())}") from None
    return out


def _apply_timeout(tiers: dict[str, ResolvedTier], timeout_s: float | None) -> dict[str, ResolvedTier]:
    if timeout_s is None:
        return tiers
    return {name: ResolvedTier(name, t.config.model_copy(update={"timeout_s": timeout_s}), t.source) for name, t in tiers.items()}


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
