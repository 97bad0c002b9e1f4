"""Which executor names are taken: what the catalogue knows, the shipped seeds, the builtins.

A synthesised or imported executor needs a name of its own; the loader would
refuse one that shadows a seed, and a builtin's name is never free.
"""

from __future__ import annotations

from typing import Any


def taken_names(catalogue_state: dict[str, Any]) -> set[str]:
    from metnos.mechanisms.executors.loader import _shipped_seed_names
    from metnos.runtime.turn.catalogue import builtin_tools

    names = {e["name"] for e in catalogue_state["executors"].values()}
    return names | _shipped_seed_names() | set(builtin_tools())
