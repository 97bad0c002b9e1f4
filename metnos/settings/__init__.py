"""Every setting of Metnos: declared once (metnos.settings.model), read once (metnos.settings.loader).

A flag wins over its ``METNOS_*`` variable, which wins over config.toml, which wins over the
default. ``metnos config show`` prints what is in force and where each value came from;
docs/config.md is generated from the model (``python -m metnos.settings.reference``).

This package is the ground floor: it imports nothing of Metnos above domain.errors.
"""

from __future__ import annotations

from collections.abc import Mapping

from metnos.settings.errors import ConfigError, SettingsError
from metnos.settings.loader import (
    Flag,
    Loaded,
    in_force,
    installed,
    load,
    load_turn_settings,
    unknown_variables,
)
from metnos.settings.model import Settings

__all__ = ["ConfigError", "Flag", "Loaded", "Settings", "SettingsError", "in_force", "installed", "load", "load_settings",
           "load_turn_settings", "unknown_variables"]


def load_settings(env: Mapping[str, str] | None = None) -> Loaded:
    """The loaded settings (an alias of :func:`load`, by the name callers have used)."""
    return load(env)
