"""``METNOS_SANDBOX``: the one switch that lets executors run unsandboxed.

Unset (or ``on``) the sandbox is required: where bwrap cannot start, nothing
runs (DESIGN decision 4). ``off`` is the explicit acceptance of the risk;
every invocation then records ``sandbox: off`` and ``metnos ask`` warns each
time. Any other value is an error rather than a guess: a typo must not
decide whether executors see the user's files. The sandbox turns that error
into SandboxUnavailable (metnos.mechanisms.sandbox.bwrap).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from metnos.settings.errors import SandboxSettingError

VARIABLE = "METNOS_SANDBOX"
ON_VALUES = ("on", "1", "yes", "true")
OFF_VALUES = ("off", "0", "no", "false")
OFF_WARNING = ("warning: METNOS_SANDBOX=off: executors run without the sandbox, with your "
               "files, your environment and the network open to them; every invocation "
               "records sandbox: off")


def parse_sandbox(raw: str | None) -> bool:
    """True (the sandbox is off) only for an explicit off; SandboxSettingError for a value
    that is neither on nor off."""
    value = (raw or "").strip().lower()
    if value in OFF_VALUES:
        return True
    if value == "" or value in ON_VALUES:
        return False
    raise SandboxSettingError(
        f"{VARIABLE}={(raw or '')[:40]!r} is not a setting it knows",
        f"set {VARIABLE} to on (the default, also {', '.join(ON_VALUES[1:])}) or off "
        f"(also {', '.join(OFF_VALUES[1:])}), or unset it",
    )


def sandbox_off(env: Mapping[str, str] | None = None) -> bool:
    """``METNOS_SANDBOX`` of ``env`` (the process's own environment when None): the environment
    an invocation is handed decides, so a test or the daemon can pass one."""
    return parse_sandbox((os.environ if env is None else env).get(VARIABLE))
