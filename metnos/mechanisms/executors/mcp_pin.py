"""What an MCP server's executors are pinned to, and whether they still are.

``metnos mcp add`` pins a stdio server by the sha256 of the files that make it
up, so that a server changed after the user approved it is quarantined before
it runs again (at boot, by the loader; before every call, by the invoker):

- the executable its command resolves to (a bare name is looked up first among
  the console scripts of the Python Metnos runs on, then on PATH; symbolic
  links resolved), and every argument that names an existing file (the script
  given to an interpreter);
- for a Python console script, every file of the installed distribution that
  declares it, as its ``RECORD`` lists them, hashed as they are on disk now
  (bytecode aside, which the interpreter rewrites): an edit to the package's
  code changes the digest even where ``RECORD`` was left as it was.

The digest covers the server's own code, not the libraries it imports (the
MCP SDK, GitPython...): those are the runtime's installed packages, bound
read-only. A server over HTTP has no code here to hash: it is pinned by its
URL and by its tools' definitions, which the bridge checks before each call.

Each executor folder of a server holds ``server.json`` (signed with the rest
of the folder): the resolved command, the tool, and this pin.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

SERVER_FILE = "server.json"
MCP_ORIGIN = "mcp"
# The check a quarantine names when the server no longer matches its pin, or changed a tool.
MCP_PIN_CHECK = "mcp-pin"
MCP_SCHEMA_CHECK = "mcp-schema"
# What the bridge answers, from inside the sandbox, when the server changed an approved tool.
SCHEMA_CHANGED_CLASSES = ("McpSchemaChanged", "McpToolMissing")
# Files a distribution lists that the interpreter rewrites at will.
_VOLATILE_SUFFIXES = (".pyc", ".pyo")


class PinError(Exception):
    """The command cannot be resolved or hashed: names what and why."""


@dataclass(frozen=True)
class Pin:
    digest: str
    # Absolute path -> its sha256: what the digest is over.
    files: dict[str, str]
    # "name version" of the console script's distribution, when there is one.
    distribution: str | None = None
    # Folders the server needs to read that the sandbox does not show by default
    # (a virtual environment of its own, a script outside the runtime's trees).
    reads: tuple[str, ...] = field(default=())
    # The arguments that name a pinned file (a script given to an interpreter).
    scripts: tuple[str, ...] = field(default=())

    def to_record(self) -> dict[str, Any]:
        return {"digest": self.digest, "files": dict(sorted(self.files.items())), "distribution": self.distribution,
                "reads": list(self.reads), "scripts": list(self.scripts)}


def resolve_executable(command: str) -> Path:
    """The file a command runs: a path as given, else the runtime's own console scripts, else PATH."""
    if "/" in command:
        found = Path(command).expanduser()
        if not found.is_file():
            raise PinError(f"{command}: no such file; give the server's executable or a command on PATH")
        return Path(os.path.realpath(found))
    scripts = Path(sysconfig.get_path("scripts")) / command
    if scripts.is_file():
        return Path(os.path.realpath(scripts))
    on_path = shutil.which(command)
    if on_path is None:
        raise PinError(f"{command}: not found among the runtime's console scripts nor on PATH; "
                       "install the server (pip install ...) or give its full path")
    return Path(os.path.realpath(on_path))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _shebang(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    return first[2:].decode("utf-8", "replace").strip().split()[0] if first[2:].strip() else None


def _venv_root(interpreter: str) -> Path | None:
    root = Path(interpreter).parent.parent
    return root if (root / "pyvenv.cfg").is_file() else None


def _distributions_for(interpreter: str | None) -> list[metadata.Distribution]:
    venv = _venv_root(interpreter) if interpreter else None
    if venv is None:
        return list(metadata.distributions())
    sites = sorted(str(p) for p in venv.glob("lib/python*/site-packages"))
    return list(metadata.distributions(path=sites))


def _console_script_distribution(exe: Path) -> tuple[metadata.Distribution | None, str | None]:
    interpreter = _shebang(exe)
    if interpreter is None or "python" not in Path(interpreter).name:
        return None, interpreter
    for dist in _distributions_for(interpreter):
        try:
            eps = dist.entry_points
        except Exception:  # noqa: BLE001 - a broken distribution's metadata is not this server's
            continue
        if any(ep.group == "console_scripts" and ep.name == exe.name for ep in eps):
            return dist, interpreter
    return None, interpreter


def _distribution_files(dist: metadata.Distribution) -> list[Path]:
    out = []
    for f in dist.files or ():
        if f.suffix in _VOLATILE_SUFFIXES or "__pycache__" in f.parts:
            continue
        path = Path(os.path.realpath(dist.locate_file(f)))
        if path.is_file():
            out.append(path)
    return out


def _digest(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path, sha in sorted(files.items()):
        h.update(f"{path}\0{sha}\n".encode())
    return "sha256:" + h.hexdigest()


def pin_command(argv: list[str], *, scripts: list[str] | None = None) -> tuple[list[str], Pin]:
    """The command with its executable resolved, and what it is pinned to.

    ``scripts``: the arguments pinned as files when the pin was made; a check
    hashes those again (a file an argument names that appeared since is data,
    not code the user approved: a flag file, an output)."""
    if not argv:
        raise PinError("no command: write `metnos mcp add NAME -- COMMAND ARGS...`")
    exe = resolve_executable(argv[0])
    files = [exe]
    reads: set[str] = set()
    for arg in argv[1:]:
        if scripts is not None:
            if arg in scripts:
                script = Path(os.path.realpath(Path(arg).expanduser()))
                if not script.is_file():
                    raise PinError(f"{arg}: the pinned script is gone")
                files.append(script)
                reads.add(str(script))
            continue
        if not arg.startswith("-") and ("/" in arg or arg.endswith(".py")) and Path(arg).expanduser().is_file():
            script = Path(os.path.realpath(Path(arg).expanduser()))
            files.append(script)
            reads.add(str(script))
    dist, interpreter = _console_script_distribution(exe)
    if dist is not None:
        files += _distribution_files(dist)
    venv = _venv_root(interpreter) if interpreter else None
    if venv is not None:
        reads.add(str(Path(os.path.realpath(venv))))
    elif not _inside_runtime(exe):
        reads.add(str(exe))
    name = f"{dist.metadata['Name']} {dist.version}" if dist is not None else None
    hashed = {str(f): _sha256(f) for f in files}
    resolved = [str(exe), *argv[1:]]
    pinned_args = tuple(a for a in argv[1:] if str(Path(os.path.realpath(Path(a).expanduser()))) in reads)
    return resolved, Pin(_digest(hashed), hashed, name, tuple(sorted(reads)), pinned_args)


def _inside_runtime(path: Path) -> bool:
    roots = [Path(os.path.realpath(p)) for p in {sys.prefix, sys.base_prefix}] + [Path("/usr"), Path("/bin"), Path("/lib")]
    return any(path.is_relative_to(r) for r in roots)


def read_server_spec(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / SERVER_FILE).read_text())
    except (OSError, ValueError) as e:
        raise PinError(f"{folder / SERVER_FILE}: cannot be read: {e}") from None


def pin_problem(folder: Path) -> str | None:
    """Why an MCP executor's server no longer matches its pin, or None.

    The same command is hashed again the same way; a stdio server whose
    executable, script or distribution changed (or vanished) fails.
    """
    try:
        spec = read_server_spec(folder)
    except PinError as e:
        return str(e)
    if spec.get("transport") != "stdio":
        return None
    pinned = (spec.get("pin") or {}).get("digest")
    try:
        _, now = pin_command(list(spec.get("command") or []), scripts=list(spec["pin"].get("scripts") or []))
    except (PinError, OSError) as e:
        return f"the server {spec.get('server')!r} cannot be hashed again: {e}"
    if now.digest != pinned:
        before = dict(spec["pin"].get("files") or {})
        changed = sorted(p for p in set(now.files) | set(before) if now.files.get(p) != before.get(p)) or ["a pinned file"]
        return (f"the server {spec.get('server')!r} changed since it was approved (pinned {pinned}, now {now.digest}; "
                f"{', '.join(changed[:3])}); re-add it with `metnos mcp add` and approve it again")
    return None
