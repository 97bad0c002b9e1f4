"""Helpers for tests that run executors: a fake home and Metnos home, and
executors written on the fly."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from metnos.mechanisms.sandbox.bwrap import probe
from metnos.settings.workspace import Workspace
from tests.support.layouts import layout_env


@dataclass
class SandboxEnv:
    root: Path
    home: Path
    env: dict[str, str]
    workspace: Workspace

    def executor(self, name: str, source: str) -> Path:
        d = self.root / "executors" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "main.py").write_text(textwrap.dedent(source))
        return d


def make_env(tmp_path: Path, layout: str = "metnos_home", **extra: str) -> SandboxEnv:
    """A user home and a workspace in ``layout``, its Metnos folders made."""
    env = layout_env(layout, tmp_path, {k: v for k, v in os.environ.items() if k != "METNOS_SANDBOX"})
    env.update(**extra)
    ws = Workspace.from_env(env)
    for d in (ws.config_dir, ws.keys_dir, ws.log_dir, ws.audit_dir, ws.views_dir):
        d.mkdir(parents=True, exist_ok=True)
    return SandboxEnv(tmp_path, Path(env["HOME"]), env, ws)


def _bwrap_reason() -> str:
    p = probe()
    return "" if p.works else f"bubblewrap cannot run here: {p.error}"


def needs_bwrap(obj):
    """Mark a test (or, as ``pytestmark = needs_bwrap``, a module)."""
    obj = pytest.mark.bwrap(obj)
    return pytest.mark.skipif(not probe().works, reason=_bwrap_reason() or "bwrap")(obj)
