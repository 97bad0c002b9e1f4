"""The two layouts a user can have, for tests that must hold in both.

``xdg`` is what a new user gets: no METNOS_HOME, config and keys under
``~/.config/metnos``, the log under ``~/.local/share/metnos``, so Metnos's
secrets sit inside any grant of ``~``. ``metnos_home`` puts everything in
one folder outside the user's home. A test of the sandbox, the turn or the
CLI takes the ``layout`` fixture (tests/conftest.py) and runs in both.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from pathlib import Path

import pytest

LAYOUTS = ("xdg", "metnos_home")
# Settings a developer's shell may carry that would move the workspace or the log.
_STRAY = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "PERSISTENCE_MODULE", "LMDB_PATH", "METNOS_LLM_URL", "METNOS_LLM_MODEL")


def layout_env(layout: str, root: Path, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with HOME at ``root/user`` and the workspace placed as ``layout`` says."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; one of {LAYOUTS}")
    env = {k: v for k, v in base.items() if k not in _STRAY and k != "METNOS_HOME"}
    user = root / "user"
    user.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(user)
    if layout == "metnos_home":
        env["METNOS_HOME"] = str(root / "metnos-home")
    return env


def apply_layout(layout: str, root: Path, mp: pytest.MonkeyPatch, environ: MutableMapping[str, str]) -> Path:
    """Set the process environment to ``layout`` under ``root``; the user's home."""
    env = layout_env(layout, root, environ)
    for key in (*_STRAY, "METNOS_HOME"):
        if key not in env:
            mp.delenv(key, raising=False)
    for key, value in env.items():
        if environ.get(key) != value:
            mp.setenv(key, value)
    return Path(env["HOME"])
