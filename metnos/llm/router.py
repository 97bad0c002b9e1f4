"""Providers for the tiers of one run, and the embedded server they may share.

``LLMRouter(settings, workspace).for_tier("wise")`` gives a provider for that
tier. If any tier used is ``embedded``, the router first looks for a server
that ``metnos model serve`` announced; if there is none, it starts one and
stops it again on ``close()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from metnos.llm.embedded import EmbeddedServer, find_running
from metnos.llm.model_files import model_path as default_model_path
from metnos.llm.provider import Provider, make_provider
from metnos.llm.tiers import LLMSettings, ResolvedTier
from metnos.workspace import Workspace


class LLMRouter:
    def __init__(
        self,
        settings: LLMSettings,
        workspace: Workspace,
        *,
        transport: httpx.BaseTransport | None = None,
        env: Mapping[str, str] | None = None,
        progress: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.settings = settings
        self.workspace = workspace
        self._transport = transport
        self._env = env
        self._progress = progress
        self._providers: dict[str, Provider] = {}
        self._embedded: dict[Path, str] = {}
        self._owned: list[EmbeddedServer] = []

    def for_tier(self, name: str) -> Provider:
        if name not in self._providers:
            tier = self.settings.tier(name)
            url = self._embedded_url(tier) if tier.config.provider == "embedded" else None
            self._providers[name] = make_provider(tier, transport=self._transport, env=self._env, embedded_url=url)
        return self._providers[name]

    def close(self) -> None:
        for p in self._providers.values():
            p.close()
        self._providers.clear()
        for server in self._owned:
            server.stop()
        self._owned.clear()
        self._embedded.clear()

    def __enter__(self) -> LLMRouter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _embedded_url(self, tier: ResolvedTier) -> str:
        path = Path(tier.config.model_path) if tier.config.model_path else default_model_path(self.workspace.models_dir)
        if path not in self._embedded:
            url = find_running(self.workspace.runtime_dir)
            if url is None:
                self._progress("starting the embedded model …")
                server = EmbeddedServer(path, log_path=self.workspace.runtime_dir / "embedded-llm.log")
                url = server.start()
                self._owned.append(server)
            self._embedded[path] = url
        return self._embedded[path]
