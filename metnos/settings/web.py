"""``[web]`` in config.toml: where find_urls searches the web.

```toml
[web]
search_url = "https://searx.example.org"   # a SearXNG instance; its host must be on [network] allow
```

find_urls asks ``<search_url>/search?q=...&format=json`` (SearXNG's JSON API). Unset, there is no
web search: find_urls says so, naming this setting. The host is checked against ``[network] allow``
when the settings are read (metnos.settings.model), so a search that the egress proxy would refuse
is an error at start, not a surprise mid-turn.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator

from metnos.settings.declare import setting

SEARCH_URL_SETTING = "[web] search_url"
SEARCH_URL_ENV = "METNOS_WEB_SEARCH_URL"


class WebSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    search_url: str = setting("", "The SearXNG instance find_urls searches with (its JSON API, `/search?format=json`); "
                                  "its host must be on `[network] allow`. Empty: no web search.", env=SEARCH_URL_ENV)

    @field_validator("search_url", mode="before")
    @classmethod
    def _http_url(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError("must be an http(s) URL, like https://searx.example.org")  # noqa: TRY004 - pydantic reports a ValueError
        value = value.strip()
        if value and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname):
            raise ValueError("must be an http(s) URL, like https://searx.example.org")
        return value.rstrip("/")

    def search_authority(self) -> tuple[str, int] | None:
        """(host, port) the search goes to; None when no search endpoint is set."""
        if not self.search_url:
            return None
        parts = urlsplit(self.search_url)
        return (parts.hostname or "").lower().rstrip("."), parts.port or (443 if parts.scheme == "https" else 80)

    def executor_config(self) -> dict[str, Any]:
        """What find_urls reads from ctx.config (metnos/mechanisms/executors/context.py)."""
        return {"web": {"search_url": self.search_url}}
