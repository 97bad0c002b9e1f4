"""The layers a setting may come from, merged in one order: a flag over its ``METNOS_*`` variable
over config.toml over the default (metnos.settings.declare.PRECEDENCE).

Each layer is a nested dict shaped like the settings; :func:`merge` lays one over another and
:func:`env_layer` reads the declared variables out of an environment mapping (blank means unset).
Every value keeps a label saying where it came from, for ``metnos config show`` and for errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from metnos.settings.declare import Leaf


def put(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        tree = tree.setdefault(part, {})
    tree[path[-1]] = value


def lookup(tree: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    at: Any = tree
    for part in path:
        if not isinstance(at, Mapping) or part not in at:
            return False, None
        at = at[part]
    return True, at


def merge(below: Mapping[str, Any], above: Mapping[str, Any]) -> dict[str, Any]:
    """``above`` laid over ``below``, table by table."""
    out = dict(below)
    for key, value in above.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def env_layer(leaves: Iterable[Leaf], env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The values the declared variables set in ``env`` (blank: unset), and each one's variable by key."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for leaf in leaves:
        raw = (env.get(leaf.env) or "").strip() if leaf.env else ""
        if raw:
            put(values, leaf.path, raw)
            sources[leaf.key] = leaf.env  # type: ignore[assignment]
    return values, sources
