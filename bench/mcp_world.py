"""The MCP world of the agent benchmark's MCP tasks: real MCP servers from PyPI added to the task's
Metnos home with `metnos mcp add` and approved, as a user would, before the request is asked.

``mcp:time`` adds mcp-server-time; ``mcp:git`` makes a small repository in the home
(~/projects/lighthouse, three commits) and adds mcp-server-git with a read grant on it alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = "projects/lighthouse"
COMMITS = ("Add the lamp schedule", "Note the keeper's rota", "Fix the lamp timer after the storm")
SERVERS = {
    "time": [["time", "--yes", "--", "mcp-server-time"]],
    "git": [["git", "--yes", "--grant-read", f"~/{REPO}", "--", "mcp-server-git"]],
}


def make_repository(home: Path) -> Path:
    folder = home / REPO
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "Keeper", "GIT_AUTHOR_EMAIL": "keeper@example.org",
           "GIT_COMMITTER_NAME": "Keeper", "GIT_COMMITTER_EMAIL": "keeper@example.org"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=folder, env=env, check=True)
    for n, message in enumerate(COMMITS):
        (folder / "log.txt").write_text("".join(f"{m}\n" for m in COMMITS[:n + 1]))
        subprocess.run(["git", "add", "log.txt"], cwd=folder, env=env, check=True)
        subprocess.run(["git", "commit", "-qm", message], cwd=folder, env=env, check=True)
    return folder


@dataclass
class McpWorld:
    server: str
    home: Path
    added: list[str] = field(default_factory=list)

    def allow(self) -> list[str]:
        return []

    def config(self) -> str:
        return ""

    def prepare(self, env: dict[str, str]) -> None:
        """Add and approve the server in the initialised home, as the user would before asking."""
        for argv in SERVERS[self.server]:
            for command in (["mcp", "add", *argv], ["mcp", "approve", argv[0]]):
                done = subprocess.run([sys.executable, "-m", "metnos", *command], env=env, cwd=env["HOME"],
                                      capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
                if done.returncode != 0:
                    raise RuntimeError(f"metnos {' '.join(command[:3])} failed: {done.stderr.strip()[-300:]}")
            self.added.append(argv[0])

    def sent(self) -> list[dict[str, Any]]:
        return []


@contextmanager
def mcp_world(world: str, home: Path) -> Iterator[McpWorld]:
    server = world.split(":", 1)[1]
    if server not in SERVERS:
        raise RuntimeError(f"no MCP world {world!r}; one of {', '.join('mcp:' + s for s in SERVERS)}")
    if server == "git":
        make_repository(home)
    yield McpWorld(server, home)
