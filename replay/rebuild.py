"""Rebuilding read models: empty a projection and fold it again from the log.

A view whose fold version changed is rebuilt by itself when it next catches
up (projections/base.py); this is the explicit, whole-log version, for
upgrades and for checking that a live view equals its rebuild.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metnos.errors import MetnosError


class UnknownProjection(MetnosError):
    """No projection by that name."""


def rebuild(runtime: Any, names: list[str] | None = None, *, progress: Callable[[str, int, int], None] | None = None) -> dict[str, int]:
    """Rebuild the named projections (all when ``names`` is empty); returns name -> bytes of the rebuilt view."""
    views = runtime.projections()
    chosen = names or sorted(views)
    unknown = [n for n in chosen if n not in views]
    if unknown:
        raise UnknownProjection(f"no projection named {', '.join(unknown)}; projections: {', '.join(sorted(views))}")
    head = runtime.log.recorder.max_notification_id() or 0
    sizes = {}
    for name in chosen:
        view = views[name]
        tick = (lambda nid, name=name: progress(name, nid, head)) if progress is not None else None
        view.rebuild(runtime.log, progress=tick)
        sizes[name] = len(view.state_bytes())
    return sizes
