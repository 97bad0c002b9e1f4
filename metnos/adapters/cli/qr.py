"""A QR code on the terminal, for `metnos pair`: the device's command, to scan rather than type (segno)."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import TextIO


def can_show(out: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``out`` is a terminal that draws block characters: not a pipe, a file or a dumb terminal."""
    env = os.environ if env is None else env
    try:
        interactive = out.isatty()
    except (AttributeError, ValueError):
        return False
    encoding = (getattr(out, "encoding", None) or "").lower().replace("-", "")
    return interactive and env.get("TERM", "") not in ("", "dumb") and encoding.startswith("utf")


def rendered(text: str) -> str:
    """``text`` as a QR code in half-block characters, two rows of modules a line, quiet zone included."""
    import segno  # deferred: only `metnos pair` on a terminal draws one

    drawn = io.StringIO()
    segno.make(text, error="m", micro=False).terminal(out=drawn, compact=True)
    return drawn.getvalue()
