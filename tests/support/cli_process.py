"""``metnos`` run as a real process against a workspace, for the fault-injection tests.

The child runs the code of this checkout (PYTHONPATH, unless the caller's
environment already names one: pointing it at another checkout is how a test
is shown to fail on the code before a fix).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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
        env.update(METNOS_HOME=str(self.metnos_home), HOME=str(self.user), PYTHONPATH=os.environ.get("PYTHONPATH") or str(REPO))
        env.update(extra)
        return env

    def spawn(self, *args: str, **extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "metnos", *args], env=self.env(**extra), cwd=self.root,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def run(self, *args: str, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "metnos", *args], env=self.env(**extra), cwd=self.root,
            capture_output=True, text=True, timeout=timeout, check=False,
        )


def initialised(root: Path) -> Home:
    home = Home(root)
    home.user.mkdir(parents=True, exist_ok=True)
    done = home.run("init")
    assert done.returncode == 0, done.stderr
    return home
