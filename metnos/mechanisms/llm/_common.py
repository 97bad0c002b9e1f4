"""Small helpers both wire formats share."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from metnos.mechanisms.llm.transport import make_client, post_json, public_url


def derived_call_id(raw: dict[str, Any], index: int) -> str:
    """An id for a call the server gave none for (or that came as text).

    It is a function of the recorded reply, so parsing the same reply again on
    replay gives the same id.
    """
    digest = hashlib.sha256(json.dumps(raw, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return f"call_{digest[:16]}_{index}"


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class HTTPProvider:
    """What both providers share: settings, one httpx client, the request/parse cycle.

    A subclass names its endpoint, builds its wire-format request, sends its
    headers and parses its reply.
    """

    dialect = ""
    default_api_key_env: str | None = None
    endpoint_for: Callable[[str], str]

    def __init__(
        self,
        *,
        url: str,
        model: str,
        timeout_s: float = 120.0,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        api_key_env: str | None = "",
        extra: Mapping[str, Any] | None = None,
        transport: httpx.BaseTransport | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self.endpoint = type(self).endpoint_for(url)
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.api_key_env = self.default_api_key_env if api_key_env == "" else api_key_env
        self.extra = dict(extra or {})
        self._env = os.environ if env is None else env
        self._client = make_client(timeout_s, transport)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={public_url(self.url)!r}, model={self.model!r})"

    def build_request(self, messages: Sequence[Any], tools: Sequence[Any] = (), *, temperature: float | None = None, max_tokens: int | None = None,
                      tool_choice: str = "auto") -> dict[str, Any]:
        raise NotImplementedError

    def parse(self, raw: dict[str, Any], tools: Sequence[Any], url: str) -> Any:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def complete(self, messages: Sequence[Any], tools: Sequence[Any] = (), *, temperature: float | None = None, max_tokens: int | None = None,
                 tool_choice: str = "auto", constraint: Any = None) -> Any:
        """``constraint`` (a CallConstraint) is a grammar this wire format cannot send: the reply says so."""
        reply = self._complete_plain(messages, tools, temperature=temperature, max_tokens=max_tokens, tool_choice=tool_choice)
        if constraint is None:
            return reply
        return dataclasses.replace(reply, constraint=constraint.record(sent=False, why_not=f"the {self.dialect} API takes no grammar"))

    def _complete_plain(self, messages: Sequence[Any], tools: Sequence[Any] = (), *, temperature: float | None = None,
                        max_tokens: int | None = None, tool_choice: str = "auto") -> Any:
        if tool_choice not in ("auto", "none"):
            raise ValueError(f"tool_choice must be 'auto' or 'none', not {tool_choice!r}")
        body = self.build_request(messages, tools, temperature=temperature, max_tokens=max_tokens, tool_choice=tool_choice)
        raw = post_json(self._client, self.endpoint, body, headers=self._headers(), timeout_s=self.timeout_s)
        # Asked for words, a call written as text stays text: the loop judges it as an answer.
        return self.parse(raw, tools if tool_choice == "auto" else (), public_url(self.endpoint))

    def close(self) -> None:
        self._client.close()
