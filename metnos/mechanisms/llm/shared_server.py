"""One warm embedded model server, shared by every command that needs it.

Loading the model costs about a second for the 0.5B and more for bigger ones,
and a fresh server has an empty prompt cache. So the first command that needs
the embedded model starts a detached server and leaves it running; later
commands find it through a small state file in the runtime dir and use it.
The server ends itself after ``idle_s`` seconds in which nobody used it
(``[model] idle_s`` in config.toml, default 600; ``METNOS_MODEL_IDLE_S``
overrides it; 0 means the old way: each command starts and stops its own).
``metnos model serve`` and the daemon announce their server the same way, and
``metnos model stop`` ends whichever is announced.

The state file, ``embedded-llm.json``: ``pid`` (the server process), ``url``,
``port``, ``model`` (its path), ``model_hash`` (see :func:`model_fingerprint`),
``template_hash`` (of the chat template it loaded),
``owner`` ("ask", "serve" or "daemon"), ``owner_pid`` (the process to signal
to stop it) and ``idle_s``. A file whose pid is dead or is not a Metnos model
server is stale and removed. A command uses a server only for the same model
file (same path and fingerprint) and chat template. Each use touches the file: that is how the
server knows it is not idle.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import blake3
import httpx

from metnos.mechanisms.llm.embedded import BUILTIN_TEMPLATE, EmbeddedServer, chat_template_for, chat_template_path
from metnos.mechanisms.llm.idle_watch import remove_if_names
# [model] idle_s is a setting (metnos.settings.model_server); the server only keeps to it.
from metnos.settings.model_server import DEFAULT_IDLE_S, ENV_IDLE  # noqa: F401 - named here by callers

STATE_FILENAME = "embedded-llm.json"
LOCK_FILENAME = "embedded-llm.lock"
LOG_FILENAME = "embedded-llm.log"
_CHILD_MARK = b"metnos.mechanisms.llm.embedded"
_SAMPLE = 1 << 20


def state_path(runtime_dir: Path) -> Path:
    return runtime_dir / STATE_FILENAME


def model_fingerprint(path: Path) -> str:
    """blake3 over the file's size and its first and last MiB: which model, without reading 0.5-2 GB."""
    size = path.stat().st_size
    h = blake3.blake3(str(size).encode() + b"\0")
    with path.open("rb") as f:
        h.update(f.read(_SAMPLE))
        if size > _SAMPLE:
            f.seek(max(_SAMPLE, size - _SAMPLE))
            h.update(f.read(_SAMPLE))
    return h.hexdigest()[:32]


def template_fingerprint(model: Path | None = None) -> str:
    """blake3 of the chat template a server of ``model`` loads (Metnos's own when no model is named):
    a server with another template renders other prompts."""
    template = chat_template_path() if model is None else chat_template_for(model)
    if template == BUILTIN_TEMPLATE:
        return blake3.blake3(b"the GGUF's own template").hexdigest()[:32]  # which GGUF: model_hash says
    return blake3.blake3(Path(template).read_bytes()).hexdigest()[:32]


@dataclass(frozen=True)
class Announced:
    url: str
    pid: int
    model: str
    model_hash: str
    owner: str
    owner_pid: int
    idle_s: float | None
    template_hash: str


def announce(runtime_dir: Path, *, url: str, pid: int, model: Path, owner: str,
             owner_pid: int | None = None, idle_s: float | None = None) -> Path:
    runtime_dir.mkdir(parents=True, exist_ok=True)
    path = state_path(runtime_dir)
    port = int(url.rsplit(":", 1)[-1].split("/")[0]) if ":" in url else 0
    record = {"url": url, "pid": pid, "port": port, "model": str(model), "model_hash": model_fingerprint(model),
              "template_hash": template_fingerprint(model), "owner": owner, "owner_pid": owner_pid or pid, "idle_s": idle_s}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)
    return path


def _is_model_server(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return _CHILD_MARK in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False


def read_announced(runtime_dir: Path) -> Announced | None:
    """The announced server if its process is a live Metnos model server; a stale file is removed."""
    path = state_path(runtime_dir)
    try:
        info = json.loads(path.read_text())
        found = Announced(url=str(info["url"]), pid=int(info["pid"]), model=str(info["model"]),
                          model_hash=str(info["model_hash"]), owner=str(info["owner"]),
                          owner_pid=int(info.get("owner_pid") or info["pid"]), idle_s=info.get("idle_s"),
                          template_hash=str(info.get("template_hash", "")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        path.unlink(missing_ok=True)  # unreadable: nobody can use it
        return None
    if not _is_model_server(found.pid):
        remove_if_names(path, found.pid)
        return None
    return found


def withdraw(runtime_dir: Path, pid: int) -> None:
    """Remove the announcement of ``pid``'s server, and only that one."""
    remove_if_names(state_path(runtime_dir), pid)


def healthy(url: str, timeout_s: float = 5.0) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=timeout_s, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def find_running(runtime_dir: Path, model: Path | None = None) -> str | None:
    """The URL of a healthy announced server (for ``model``'s file, when given), touched as used."""
    found = read_announced(runtime_dir)
    if found is None:
        return None
    if model is not None:
        try:
            same = (Path(found.model).resolve() == model.resolve() and found.model_hash == model_fingerprint(model)
                    and found.template_hash == template_fingerprint(model))
        except OSError:
            same = False
        if not same:
            return None
    if not healthy(found.url):
        return None
    touch(runtime_dir)
    return found.url


def touch(runtime_dir: Path) -> None:
    """Tell the announced server it is in use (its idle clock restarts)."""
    with contextlib.suppress(OSError):
        os.utime(state_path(runtime_dir))


@contextlib.contextmanager
def start_lock(runtime_dir: Path) -> Iterator[None]:
    """One process at a time finds or starts the shared server: two asks at once share one."""
    runtime_dir.mkdir(parents=True, exist_ok=True)
    with (runtime_dir / LOCK_FILENAME).open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def start_shared(runtime_dir: Path, model: Path, idle_s: float, *, owner: str = "ask") -> str:
    """Find the shared server for ``model``, or start one that outlives this process."""
    with start_lock(runtime_dir):
        url = find_running(runtime_dir, model)
        if url is not None:
            return url
        server = EmbeddedServer(model, log_path=runtime_dir / LOG_FILENAME, idle_s=idle_s,
                                state_file=state_path(runtime_dir))
        url = server.start()
        announce(runtime_dir, url=url, pid=server.pid or 0, model=model, owner=owner, idle_s=idle_s)
        server.release()
        return url


def stop_announced(runtime_dir: Path, timeout_s: float = 10.0) -> Announced | None:
    """End the announced server (the owner when it is ``model serve`` or the daemon); None if there was none."""
    found = read_announced(runtime_dir)
    if found is None:
        return None
    target = found.owner_pid if found.owner_pid != found.pid and _alive(found.owner_pid) else found.pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(target, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(found.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(found.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(found.pid, signal.SIGKILL)
    remove_if_names(state_path(runtime_dir), found.pid)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purpose; its parent reaps it.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# The server's side (in the detached child, see metnos.mechanisms.llm.embedded).
