"""What can go wrong talking to an LLM, as a small hierarchy (like httpx's).

Every error has a one-line ``str()`` a person can read, and ``to_dict()`` for
the structured error a turn ends with (seeds/002 ch. 12: never a traceback).
Nothing here ever carries a request header, so an API key cannot leak
through an error message.
"""

from __future__ import annotations

from typing import Any

# The two config-facing classes live with the settings that raise them; this is their home for the LLM layer.
from metnos.settings.errors import LLMConfigError, LLMError

__all__ = ["EmbeddedUnavailable", "LLMConfigError", "LLMError", "MalformedReply", "ModelInstallError", "ModelNotInstalled",
           "ProviderHTTPError", "ProviderTimeout", "ProviderUnreachable"]


class ProviderUnreachable(LLMError):
    """No answer at the transport level: refused, reset, DNS, or no reply in time."""

    kind = "provider_unreachable"

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"the LLM server at {url} is unreachable: {reason}")

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "url": self.url}


class ProviderTimeout(ProviderUnreachable):
    """Connected (or tried to) but no complete reply within the tier's timeout."""

    kind = "provider_timeout"

    def __init__(self, url: str, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        super().__init__(url, f"no reply within {timeout_s:g} s")


class ProviderHTTPError(LLMError):
    """The server answered with an HTTP error status."""

    kind = "provider_http_error"

    EXCERPT_CHARS = 300

    def __init__(self, url: str, status: int, body: str) -> None:
        self.url = url
        self.status = status
        excerpt = " ".join(body.split())
        if len(excerpt) > self.EXCERPT_CHARS:
            excerpt = excerpt[: self.EXCERPT_CHARS] + "…"
        self.body_excerpt = excerpt
        detail = f": {excerpt}" if excerpt else ""
        super().__init__(f"the LLM server at {url} answered HTTP {status}{detail}")

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "url": self.url, "status": self.status, "body": self.body_excerpt}


class MalformedReply(LLMError):
    """The server answered 2xx but not with a reply we can read."""

    kind = "malformed_reply"

    def __init__(self, url: str, detail: str) -> None:
        self.url = url
        self.detail = detail
        super().__init__(f"the LLM server at {url} sent a reply that cannot be read: {detail}")

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "url": self.url, "detail": self.detail}


class EmbeddedUnavailable(LLMError):
    """The embedded model cannot be served (extra missing, server failed to start)."""

    kind = "embedded_unavailable"


class ModelNotInstalled(EmbeddedUnavailable):
    kind = "model_not_installed"

    def __init__(self, path: str, hint: str = "run `metnos model install`") -> None:
        self.path = path
        super().__init__(f"the embedded model is not installed at {path}; {hint}")


class ModelInstallError(LLMError):
    """Fetching, joining or verifying the embedded model failed."""

    kind = "model_install"
