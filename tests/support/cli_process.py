"""``metnos`` run as a real process against a workspace, for the fault-injection tests.

The child runs the code of this checkout (PYTHONPATH, unless the caller's
environment already names one: pointing it at another checkout is how a test
is shown to fail on the code before a fix).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Home:
    """A Metnos workspace and the user's home beside it."""

    root: Path

    @property
    def metnos_home(self) -> Path:
        return self.root / "metnos-home"

    @property
    def user(self) -> Path:
        return self.root / "user"

    @property
    def data(self) -> Path:
        return self.metnos_home / "data"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("METNOS_", "LMDB_", "PERSISTENCE_"))}
        env.update(METNOS_HOME=str(self.metnos_home), HOME=str(self.user))
        return metnos_env(env, **extra)

    def spawn(self, *args: str, **extra: str) -> subprocess.Popen:
        return spawn(args, self.env(**extra), cwd=self.root)

    def run(self, *args: str, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
        return run(args, self.env(**extra), timeout=timeout, cwd=self.root)


def metnos_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a child ``metnos`` (by default this process's, as a test's
    fixtures laid it out), running this checkout's code."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH") or str(REPO)
    env.update(extra)
    return env


def spawn(argv: Sequence[str], env: Mapping[str, str], **kw: Any) -> subprocess.Popen:
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", "metnos", *argv], env=dict(env), text=True, **kw)


def run(argv: Sequence[str], env: Mapping[str, str], *, timeout: float = 300, **kw: Any) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    return subprocess.run([sys.executable, "-m", "metnos", *argv], env=dict(env), text=True, timeout=timeout, check=False, **kw)


def wait_for(condition: Callable[[], Any], *, timeout: float, what: str, proc: subprocess.Popen | None = None) -> Any:
    """Poll until ``condition()`` is true; fail naming ``what`` (and the process's output if it ended first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}:\n{out}\n{err}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def initialised(root: Path) -> Home:
    """A workspace at ``root`` as `metnos init` leaves it (a copy: tests/support/workspace_template.py)."""
    from tests.support.workspace_template import initialise  # noqa: PLC0415 - it runs `init` through this module

    home = Home(root)
    home.user.mkdir(parents=True, exist_ok=True)
    initialise(home.env())
    return home
