"""Two Metnos workspaces on one machine, a server and a device, paired by the real commands."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.support.cli_process import Home


def server_home(root: Path, initialised_workspace: Callable[[str], Path]) -> Home:
    """A workspace `metnos init` made: its own instance key, log and signed seeds."""
    shutil.copytree(initialised_workspace("metnos_home"), root, symlinks=True, dirs_exist_ok=True)
    return Home(root)


def device_home(root: Path) -> Home:
    """A bare workspace of its own: no key of the server's, nothing signed."""
    home = Home(root)
    home.user.mkdir(parents=True)
    return home


def pair(server: Home, device: Home, name: str = "laptop") -> dict:
    """`metnos pair` on the server, `metnos pair CODE --server URL` on the device; both answers merged."""
    waiting = server.spawn("pair", "--json")
    offered = json.loads(waiting.stdout.readline())
    joined = device.run("pair", offered["code"], "--server", offered["server"], "--name", name, "--json", timeout=60)
    assert joined.returncode == 0, joined.stderr
    _, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    return {**offered, **json.loads(joined.stdout)}
