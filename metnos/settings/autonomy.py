"""The autonomy levels' names and spellings: what ``[runtime] autonomy`` and ``--autonomy`` may say.

What each level changes is the sandbox's business (metnos.mechanisms.sandbox.autonomy);
only the names are settings.
"""

from __future__ import annotations

from typing import Any

from metnos.settings.errors import AutonomyError

READ_ONLY = "read_only"
SUPERVISED = "supervised"
FULL = "full"
DEFAULT = SUPERVISED
LEVELS = (READ_ONLY, SUPERVISED, FULL)

# How users may spell a level (config.toml, --autonomy).
SPELLINGS = {
    "read_only": READ_ONLY, "readonly": READ_ONLY, "read-only": READ_ONLY,
    "supervised": SUPERVISED,
    "full": FULL,
}

__all__ = ["DEFAULT", "FULL", "LEVELS", "READ_ONLY", "SPELLINGS", "SUPERVISED", "AutonomyError", "parse_level"]


def parse_level(value: Any, *, source: str = "--autonomy") -> str:
    if isinstance(value, str) and value.strip().lower() in SPELLINGS:
        return SPELLINGS[value.strip().lower()]
    msg = f"{source}: {value!r} is not an autonomy level (read_only, supervised or full)"
    raise AutonomyError(msg)
