"""The daemon's bearer token: one secret in the config dir, mode 0600, made on first use.

Every HTTP request to the daemon carries it (``Authorization: Bearer …``, or
the dashboard's cookie). It is never written to the log or printed by the
daemon itself; ``metnos daemon token`` prints it for the user.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from domain.errors import MetnosError
from metnos.settings.workspace import Workspace

TOKEN_FILE = "daemon.token"


class TokenFileError(MetnosError):
    """The token file is unreadable or open to other users."""


def token_path(workspace: Workspace) -> Path:
    return workspace.config_dir / TOKEN_FILE


def load_or_create_token(workspace: Workspace) -> str:
    """The token, made (32 random bytes, URL-safe) when there is none yet.

    A token file that group or others can read is refused: anyone who read it
    could act as the user through the daemon.
    """
    path = token_path(workspace)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(token + "\n")
        return token
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        msg = f"{path} is readable by other users (mode {mode:04o}); run `chmod 600 {path}` or delete it to make a new token"
        raise TokenFileError(msg)
    token = path.read_text(encoding="utf-8").strip()
    if len(token) < 16:
        raise TokenFileError(f"{path} holds no usable token; delete it and a new one is made")
    return token


def same_token(given: str | None, expected: str) -> bool:
    """Compared in constant time, so a wrong guess teaches nothing about the right one."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())
