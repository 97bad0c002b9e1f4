"""Providers for the tiers of one run, and the embedded server they may share.

``LLMRouter(settings, workspace).for_tier("wise")`` gives a provider for that
tier. If any tier used is ``embedded``, the router uses the server announced
in the runtime dir (by ``metnos model serve``, the daemon, or an earlier
command) when it serves the same model file; if there is none, it starts one
that stays warm for the next command until idle (metnos.mechanisms.llm.shared_server).
With an idle time of 0 it starts its own and stops it on ``close()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from metnos.mechanisms.llm import shared_server
from metnos.mechanisms.llm.embedded import EmbeddedServer
from metnos.mechanisms.llm.errors import ModelNotInstalled
from metnos.mechanisms.llm.model_files import install_hint, resolve_model
from metnos.mechanisms.llm.ollama_store import PREFIX as OLLAMA_PREFIX
from metnos.mechanisms.llm.provider import Provider, make_provider
from metnos.settings.llm_tiers import LLMSettings, ResolvedTier
from metnos.settings.loader import for_workspace
from metnos.settings.workspace import Workspace


def embedded_model_file(tier: ResolvedTier, workspace: Workspace, env: Mapping[str, str] | None = None) -> Path:
    """The GGUF file an embedded tier serves."""
    choice = tier.config.model_path
    ollama_models = None
    if choice and choice.strip().startswith(OLLAMA_PREFIX):
        ollama_models = Path(for_workspace(workspace, env).settings.model.ollama_models).expanduser()
    return resolve_model(workspace.models_dir, choice, ollama_models=ollama_models)


def embedded_model_files(settings: LLMSettings, workspace: Workspace, env: Mapping[str, str] | None = None) -> list[Path]:
    """The model files the embedded tiers serve, each once, in tier order."""
    found: dict[Path, None] = {}
    for tier in settings.tiers.values():
        if tier.config.provider == "embedded":
            found.setdefault(embedded_model_file(tier, workspace, env), None)
    return list(found)


class LLMRouter:
    def __init__(
        self,
        settings: LLMSettings,
        workspace: Workspace,
        *,
        transport: httpx.BaseTransport | None = None,
        env: Mapping[str, str] | None = None,
        progress: Callable[[str], None] = lambda _line: None,
        idle_s: float | None = None,
    ) -> None:
        """``idle_s``: how long a server this router starts stays warm after
        its last use; by default from the config (``[model] idle_s``)."""
        self.settings = settings
        self.workspace = workspace
        self._transport = transport
        self._env = env
        self._progress = progress
        self._providers: dict[str, Provider] = {}
        self._embedded: dict[Path, str] = {}
        self._owned: list[EmbeddedServer] = []
        self._idle_s = idle_s
        self._shared = False

    def for_tier(self, name: str) -> Provider:
        if self._shared:
            shared_server.touch(self.workspace.runtime_dir)
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
        if self._shared:
            shared_server.touch(self.workspace.runtime_dir)
            self._shared = False
        self._embedded.clear()

    def __enter__(self) -> LLMRouter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _embedded_url(self, tier: ResolvedTier) -> str:
        path = embedded_model_file(tier, self.workspace, self._env)
        if path not in self._embedded:
            runtime_dir = self.workspace.runtime_dir
            url = shared_server.find_running(runtime_dir, path)
            self._shared = self._shared or url is not None
            if url is None and not path.is_file():
                raise ModelNotInstalled(str(path), install_hint(path))
            idle_s = self._idle_s
            if url is None and idle_s is None:
                idle_s = for_workspace(self.workspace, self._env).settings.model.idle_s
            if url is None and idle_s:
                self._progress(f"starting the embedded model ({path.name}; it stays warm for the next command) …")
                url = shared_server.start_shared(runtime_dir, path, idle_s)
                self._shared = True
            elif url is None:
                self._progress(f"starting the embedded model ({path.name}) …")
                server = EmbeddedServer(path, log_path=runtime_dir / shared_server.LOG_FILENAME)
                url = server.start()
                self._owned.append(server)
            self._embedded[path] = url
        return self._embedded[path]
