"""What `metnos init` leaves, made once a test process for each layout and copied where a test needs it.

`init` signs the seeds and runs their birth tests in bubblewrap: ten seconds on an idle machine,
twenty or more under the suite's load, and hundreds of tests and daemons start from an initialised
workspace. The workspace holds no path of its own (the log records digests and the sandbox's
fingerprint, not folders), so a copy is the workspace `init` would have made there; its births are
taken as the log records them. METNOS_TEST_FRESH_INIT=1 runs `init` every time instead.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tests.support.cli_process import metnos_env, run
from tests.support.layouts import layout_env

_MADE: dict[str, Path] = {}
# The environment the test process started with (tests/conftest.py imports this module at collection),
# not one a test has patched by the time it first asks for a template (METNOS_SANDBOX=off, say).
_SESSION_ENV = dict(os.environ)


def template(layout: str) -> Path:
    """A folder holding the user's home and the workspace as `metnos init` leaves them in ``layout``."""
    if layout not in _MADE:
        root = Path(tempfile.mkdtemp(prefix=f"metnos-initialised-{layout}-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        done = run(["init"], metnos_env(layout_env(layout, root, _SESSION_ENV)))
        assert done.returncode == 0, f"metnos init failed in the {layout} layout:\n{done.stderr}"
        _MADE[layout] = root
    return _MADE[layout]


def initialise(env: Mapping[str, str]) -> None:
    """The workspace ``env`` names (HOME, and METNOS_HOME where it is set) as `metnos init` leaves it."""
    if os.environ.get("METNOS_TEST_FRESH_INIT") == "1":
        done = run(["init"], metnos_env(env))
        assert done.returncode == 0, done.stderr
        return
    made = template("metnos_home" if env.get("METNOS_HOME") else "xdg")
    # In the xdg layout the workspace is in the user's home (~/.config/metnos, ~/.local/share/metnos).
    shutil.copytree(made / "user", env["HOME"], symlinks=True, dirs_exist_ok=True)
    if env.get("METNOS_HOME"):
        shutil.copytree(made / "metnos-home", env["METNOS_HOME"], symlinks=True, dirs_exist_ok=True)
