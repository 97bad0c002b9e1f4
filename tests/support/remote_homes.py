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


def serve(device: Home):
    """`metnos device serve` in its own process; the process and the URL it printed."""
    serving = device.spawn("device", "serve", "--json")
    return serving, json.loads(serving.stdout.readline())["url"]


def stop(serving) -> None:
    serving.terminate()
    serving.wait(timeout=10)


def place_on_device(server: Home, executor: str, device: str = "laptop", version: str = "1.1.0") -> None:
    """The server's seed ``executor`` as a new version whose manifest names ``device``, signed with the server's key:
    how a user puts an executor on a device (a changed manifest is a new version)."""
    from metnos.mechanisms.executors.keys import load_signing_key
    from metnos.mechanisms.executors.signing import sign_executor
    from metnos.settings.workspace import Workspace

    workspace = Workspace.from_env(server.env())
    base = workspace.executors_origin_dir("seed") / executor
    current = (base / "CURRENT").read_text().strip()
    placed = base / version
    shutil.copytree(base / current, placed)
    manifest = placed / "manifest.toml"
    text = manifest.read_text()
    manifest.write_text(text.replace(f'version = "{current}"', f'version = "{version}"', 1)
                        .replace("[executor]\n", f'[executor]\ndevice = "{device}"\n', 1))
    sign_executor(placed, load_signing_key(workspace))
    (base / "CURRENT").write_text(version + "\n")
