"""Which executor names are taken: what the catalogue knows, the shipped seeds, the builtins.

A synthesised or imported executor needs a name of its own; the loader would
refuse one that shadows a seed, and a builtin's name is never free.
"""

from __future__ import annotations

from typing import Any

from metnos.mechanisms.executors.loader import shipped_seed_names
from metnos.runtime.step.catalogue import builtin_tools


def taken_names(catalogue_state: dict[str, Any]) -> set[str]:
    names = {e["name"] for e in catalogue_state["executors"].values()}
    return names | shipped_seed_names() | set(builtin_tools())
