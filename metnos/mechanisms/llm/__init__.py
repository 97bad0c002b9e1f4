"""LLM providers: one neutral conversation, two wire formats, four tiers.

The turn loop speaks ``messages`` to a ``Provider`` and gets an ``LLMReply``
back; which server sits behind it (llama-server, Ollama, vLLM, Anthropic, or
the embedded model) is a matter of configuration (``tiers``).
"""

from metnos.mechanisms.llm.errors import (
    EmbeddedUnavailable,
    LLMConfigError,
    LLMError,
    MalformedReply,
    ModelInstallError,
    ModelNotInstalled,
    ProviderHTTPError,
    ProviderTimeout,
    ProviderUnreachable,
)
from metnos.mechanisms.llm.messages import (
    AssistantMessage,
    LLMReply,
    Message,
    SystemMessage,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)
from metnos.mechanisms.llm.provider import Provider, make_provider
from metnos.settings.config_file import load_llm_settings
from metnos.settings.llm_tiers import TIERS, LLMSettings, ResolvedTier, TierConfig

__all__ = [
    "TIERS",
    "AssistantMessage",
    "EmbeddedUnavailable",
    "LLMConfigError",
    "LLMError",
    "LLMReply",
    "LLMSettings",
    "MalformedReply",
    "Message",
    "ModelInstallError",
    "ModelNotInstalled",
    "Provider",
    "ProviderHTTPError",
    "ProviderTimeout",
    "ProviderUnreachable",
    "ResolvedTier",
    "SystemMessage",
    "TierConfig",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "load_llm_settings",
    "make_provider",
]
