"""What a builtin job is given and gives back (seeds/002 ch. 11.2.1).

Its own module so that the jobs (the agers, the mnestome's and the cascade's
maintenance) and the registry that names them (``callbacks``) can each import
it without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class CallbackResult:
    ok: bool
    kind: str = "ok"
    output: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    # Aggregates with pending events, committed together with the firing.
    aggregates: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class CallbackContext:
    runtime: Any
    now: datetime
    schedule_id: str


Callback = Callable[[CallbackContext, dict[str, Any]], CallbackResult]
