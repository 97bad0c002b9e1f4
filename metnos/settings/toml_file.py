"""Reading config.toml: the one place the file is opened (the loader calls it once per process)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from metnos.settings.errors import ConfigError


def read_toml(config_file: Path | None) -> dict[str, Any]:
    """The parsed file; a missing file is an empty config."""
    if config_file is None or not config_file.is_file():
        return {}
    try:
        return tomllib.loads(config_file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{config_file}: not valid TOML: {e}") from None
