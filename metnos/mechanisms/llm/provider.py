"""What the turn loop talks to: a ``Provider``, and the factory that builds one from a tier."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import httpx

from metnos.mechanisms.llm.anthropic import AnthropicProvider
from metnos.mechanisms.llm.constraint import Constraint
from metnos.mechanisms.llm.errors import EmbeddedUnavailable
from metnos.mechanisms.llm.messages import LLMReply, Message, ToolSpec
from metnos.mechanisms.llm.openai_compat import OpenAICompatProvider
from metnos.settings.llm_tiers import ResolvedTier, TierConfig


@runtime_checkable
class Provider(Protocol):
    dialect: str
    url: str
    model: str

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        tool_choice: str = "auto",
        constraint: Constraint | None = None,
    ) -> LLMReply:
        """One request, one reply. ``None`` means the tier's own setting (temperature 0 by default).

        ``tool_choice="none"`` shows the tools but asks for an answer in words: the prompt
        keeps the prefix of the round before (the server's prompt cache reuses it), and a
        call the model writes anyway comes back as text, not as a call.

        ``constraint`` holds the reply to a grammar of the calls the round accepts, where the
        server takes one; the reply's ``constraint`` record says whether it did.

        Raises an ``LLMError`` (never an httpx or JSON error) when it cannot answer.
        """
        ...

    def close(self) -> None: ...


def request_extra(config: TierConfig) -> dict[str, Any]:
    """The tier's ``extra`` with its ``reasoning`` setting in the provider's words (an explicit ``extra`` wins)."""
    extra = dict(config.extra)
    if config.reasoning is None:
        return extra
    if config.provider == "anthropic":
        if config.reasoning:
            extra.setdefault("thinking", {"type": "enabled", "budget_tokens": max(1024, config.max_tokens // 2)})
        return extra
    kwargs = dict(extra.get("chat_template_kwargs") or {})
    kwargs.setdefault("enable_thinking", config.reasoning)
    extra["chat_template_kwargs"] = kwargs
    return extra


def make_provider(
    tier: TierConfig | ResolvedTier,
    *,
    transport: httpx.BaseTransport | None = None,
    env: Mapping[str, str] | None = None,
    embedded_url: str | None = None,
) -> Provider:
    """A provider for one tier. ``transport`` replaces the network (httpx.MockTransport in tests).

    An ``embedded`` tier needs the URL of a running embedded server
    (``metnos.mechanisms.llm.router.LLMRouter`` starts one when needed).
    """
    config = tier.config if isinstance(tier, ResolvedTier) else tier
    common = dict(
        model=config.model,
        timeout_s=config.timeout_s,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        extra=request_extra(config),
        transport=transport,
        env=env,
    )
    if config.provider == "anthropic":
        return AnthropicProvider(url=config.effective_url or "", api_key_env=config.effective_api_key_env, **common)
    if config.provider == "openai":
        return OpenAICompatProvider(url=config.url or "", api_key_env=config.api_key_env,
                                    grammar="probe" if config.constrained else "off", **common)
    if config.provider == "embedded":
        if not embedded_url:
            raise EmbeddedUnavailable("the embedded model is not running (start it with `metnos model serve`)")
        # The embedded server is llama.cpp built with llguidance: no need to ask.
        return OpenAICompatProvider(url=embedded_url, api_key_env=None, grammar="on" if config.constrained else "off", **common)
    raise AssertionError(f"unhandled provider {config.provider!r}")  # the config model admits no other
