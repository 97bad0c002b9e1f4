"""A command that talks to the running daemon over its HTTP API (``metnos inbox``).

What waits for the user (an approval, a question) lives in the daemon's
memory while its turn waits, so a command answers it through the daemon, as
the dashboard does: with the bearer token of the config dir
(metnos/services/token.py), at the address the daemon wrote when it started
serving (``.runtime/daemon.url``, gone when it stops), else ``[daemon] http``
of config.toml.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import httpx

from domain.errors import MetnosError
from metnos.services.token import load_or_create_token, token_path
from metnos.settings.config_file import load_daemon_config
from metnos.settings.workspace import Workspace

URL_FILE = "daemon.url"
# How the daemon's API names the device a request comes from (metnos/adapters/daemon/api.py).
DEVICE_HEADER, DEVICE = "x-metnos-device", "cli"
TIMEOUT_S = 30.0


class DaemonUnreachable(MetnosError):
    """No daemon answers at the address the workspace names."""


class DaemonRefused(MetnosError):
    """The daemon answered with an error; its message names the cause."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def url_file(workspace: Workspace) -> Path:
    return workspace.runtime_dir / URL_FILE


def note_served(workspace: Workspace, url: str) -> None:
    """Where the daemon serves, for the commands that talk to it (written at start, mode 0600)."""
    path = url_file(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(url + "\n")


def forget_served(workspace: Workspace, url: str) -> None:
    """At stop: the address is no longer served (left alone if another daemon has written its own since)."""
    path = url_file(workspace)
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8").strip() == url:
            path.unlink()


def daemon_url(workspace: Workspace, http: str | None = None) -> str:
    """``http`` (HOST:PORT, a command's --http) if given, else where the daemon wrote it serves, else [daemon] http."""
    if http:
        return f"http://{http}"
    try:
        written = url_file(workspace).read_text(encoding="utf-8").strip()
    except OSError:
        written = ""
    return written or f"http://{load_daemon_config(workspace.config_file).http}"


def call(workspace: Workspace, method: str, path: str, body: dict[str, Any] | None = None, *, http: str | None = None) -> Any:
    """One request to the daemon's API; its JSON answer, or DaemonRefused with the daemon's own message."""
    url = daemon_url(workspace, http)
    if not token_path(workspace).exists():
        raise DaemonUnreachable(f"no daemon token in {token_path(workspace)}: the daemon has never run for this workspace; "
                                "start it with `metnos daemon`")
    # The command line is a device of its own: never paired (it asks nothing), so never a guest's.
    headers = {"Authorization": f"Bearer {load_or_create_token(workspace)}", DEVICE_HEADER: DEVICE}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT_S) as client:
            reply = client.request(method, path, json=body)
    except httpx.HTTPError as e:
        raise DaemonUnreachable(f"no daemon answers at {url} ({type(e).__name__}); start it with `metnos daemon`, "
                                "or set [daemon] http in config.toml to where it serves") from None
    try:
        data = reply.json()
    except ValueError:
        data = None
    if reply.status_code >= 400:
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else f"HTTP {reply.status_code}"
        raise DaemonRefused(str(message), reply.status_code)
    return data
