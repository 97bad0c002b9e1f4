"""``METNOS_SANDBOX``: the one switch that lets executors run unsandboxed.

Unset (or ``on``) the sandbox is required: where bwrap cannot start, nothing
runs (DESIGN decision 4). ``off`` is the explicit acceptance of the risk;
every invocation then records ``sandbox: off`` and ``metnos ask`` warns each
time. Any other value is an error rather than a guess: a typo must not
decide whether executors see the user's files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from metnos.mechanisms.failures import SandboxUnavailable

VARIABLE = "METNOS_SANDBOX"
ON_VALUES = ("on", "1", "yes", "true")
OFF_VALUES = ("off", "0", "no", "false")
INSTALL_FIX = ("install bubblewrap (e.g. `apt install bubblewrap`) and check that "
               "`metnos sandbox status` says it is active, or set METNOS_SANDBOX=off "
               "to run executors unsandboxed at your own risk")
OFF_WARNING = ("warning: METNOS_SANDBOX=off: executors run without the sandbox, with your "
               "files, your environment and the network open to them; every invocation "
               "records sandbox: off")


def sandbox_off(env: Mapping[str, str] | None = None) -> bool:
    """True only for an explicit off; raises SandboxUnavailable for a value
    that is neither on nor off."""
    env = os.environ if env is None else env
    raw = env.get(VARIABLE)
    value = (raw or "").strip().lower()
    if value in OFF_VALUES:
        return True
    if value == "" or value in ON_VALUES:
        return False
    raise SandboxUnavailable(
        f"{VARIABLE}={raw[:40]!r} is not a setting it knows",
        f"set {VARIABLE} to on (the default, also {', '.join(ON_VALUES[1:])}) or off "
        f"(also {', '.join(OFF_VALUES[1:])}), or unset it",
    )


def bwrap_missing(reason: str | None) -> SandboxUnavailable:
    return SandboxUnavailable(f"bubblewrap cannot start ({reason or 'unknown reason'})", INSTALL_FIX)
