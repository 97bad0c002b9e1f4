"""The core forbidden paths: what no profile can grant (seeds/000 ch. 5.5).

Hard-coded on purpose: widening this list is a code change with review,
never a manifest edit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from metnos.mechanisms.sandbox.hints import home_of
from metnos.settings.workspace import Workspace

# Relative to the user's home.
_HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".config/metnos",
    ".config/myclaw",
    ".pki",
    ".password-store",
    ".aws",
    ".docker",
    ".kube",
    ".netrc",
    ".git-credentials",
)

# System trees that are never granted wholesale; the sandbox shows only an
# allow-list of innocuous files from them.
SYSTEM_ROOTS = (Path("/etc"), Path("/proc"), Path("/sys"), Path("/dev"), Path("/boot"))


def user_forbidden(workspace: Workspace, env: Mapping[str, str]) -> list[Path]:
    """Secrets and Metnos's own state, as given and symlink-resolved.

    Resolved afresh at every call: a symlink or folder made since the last
    call changes what must be masked."""
    home = os.fspath(home_of(env))
    raw = [os.path.join(home, p) for p in _HOME_SECRETS] + [os.fspath(p) for p in workspace.forbidden_paths()]
    # Signed executor code, undo blobs and runtime state: a grant on
    # $WORKSPACE must not let an executor rewrite another executor or the
    # before-images that undo relies on.
    raw += [os.fspath(workspace.executors_dir), os.fspath(workspace.blobs_dir), os.fspath(workspace.runtime_dir)]
    out: dict[str, None] = {}
    cwd = os.getcwd()
    resolved: dict[str, str] = {}
    for p in raw:
        absolute = p if os.path.isabs(p) else os.path.join(cwd, p)
        out.setdefault(absolute, None)
        out.setdefault(_realpath(absolute, resolved), None)
    return [Path(p) for p in out]


_DOT_OR_EMPTY = re.compile(r"/\.{0,2}(?=/|$)")


def _realpath(path: str, resolved: dict[str, str]) -> str:
    """``os.path.realpath(path)``, sharing the folders already resolved in
    ``resolved``: the paths resolved together here mostly share their
    parents (the home, ~/.config, the workspace), and realpath would look at
    every folder of every one of them again."""
    if _DOT_OR_EMPTY.search(path):
        return os.path.realpath(path)  # a ".", ".." or empty part: realpath's own rules
    found = resolved.get(path)
    if found is not None:
        return found
    parent, name = os.path.split(path)
    if not name:
        return path
    full = os.path.join(_realpath(parent, resolved), name)
    found = os.path.realpath(full) if os.path.islink(full) else full
    resolved[path] = found
    return found


def is_inside(path: Path, roots: list[Path]) -> Path | None:
    # The same test as ``path.is_relative_to(r)`` for POSIX paths (r's parts
    # begin path's), without the exception is_relative_to raises and catches
    # for every root that does not match: this runs for each path argument of
    # each step, against every forbidden path and grant.
    parts = path.parts
    for r in roots:
        rp = r.parts
        if parts[:len(rp)] == rp:
            return r
    return None


def covers_system_root(path: Path) -> Path | None:
    """The system root that granting ``path`` would expose, if any."""
    for root in SYSTEM_ROOTS:
        if path == root or path.is_relative_to(root) or root.is_relative_to(path):
            return root
    return None
