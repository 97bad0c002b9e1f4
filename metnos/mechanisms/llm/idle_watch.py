"""The shared model server's own watch: it ends itself once nobody has used it for a while.

Runs in the server's child process (metnos/mechanisms/llm/embedded.py); the
parent side, which announces, finds and stops the server, is
metnos/mechanisms/llm/shared_server.py. Both read the same state file.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path


def remove_if_names(path: Path, pid: int) -> None:
    try:
        if int(json.loads(path.read_text())["pid"]) == pid:
            path.unlink(missing_ok=True)
    except (OSError, ValueError, KeyError, TypeError):
        pass


def serve_until_idle(url: str, idle_s: float, state_file: Path | None, *, tick_s: float | None = None) -> None:
    """Return once nobody has used this server for ``idle_s`` seconds.

    A use is a touch of the state file while it names this process, or a
    request being processed (llama.cpp's /slots) when the time is up.
    """
    tick = tick_s or min(5.0, max(0.2, idle_s / 10))
    last_use = time.time()
    me = os.getpid()
    while True:
        time.sleep(tick)
        ours = _names(state_file, me)
        if ours is not None:
            last_use = max(last_use, ours)
        if time.time() - last_use < idle_s:
            continue
        if _processing(url):
            last_use = time.time()
            continue
        if state_file is not None:
            remove_if_names(state_file, me)
        return


def _names(state_file: Path | None, pid: int) -> float | None:
    """The state file's mtime if it names ``pid``."""
    if state_file is None:
        return None
    try:
        mtime = state_file.stat().st_mtime
        return mtime if int(json.loads(state_file.read_text())["pid"]) == pid else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _processing(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/slots", timeout=5) as r:  # noqa: S310 - our own loopback server
            return any(s.get("is_processing") for s in json.loads(r.read()))
    except (OSError, ValueError, AttributeError):
        return False
