"""The core forbidden paths: what no profile can grant (seeds/000 ch. 5.5).

Hard-coded on purpose: widening this list is a code change with review,
never a manifest edit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from metnos.sandbox.hints import home_of
from metnos.workspace import Workspace

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
    """Secrets and Metnos's own state, as given and symlink-resolved."""
    home = home_of(env)
    raw = [home / p for p in _HOME_SECRETS] + list(workspace.forbidden_paths())
    # Signed executor code, undo blobs and runtime state: a grant on
    # $WORKSPACE must not let an executor rewrite another executor or the
    # before-images that undo relies on.
    raw += [workspace.executors_dir, workspace.blobs_dir, workspace.runtime_dir]
    # As strings until the end: this runs at every invocation, and building
    # three Path objects per entry cost more than resolving it.
    out: dict[str, None] = {}
    cwd = os.getcwd()
    for p in map(os.fspath, raw):
        out.setdefault(p if os.path.isabs(p) else os.path.join(cwd, p), None)
        out.setdefault(os.path.realpath(p), None)
    return list(dict.fromkeys(map(Path, out)))


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
