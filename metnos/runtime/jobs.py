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

from eventsourcing.application import AggregateNotFoundError

from domain.digest import Digest, digest_id


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
    # tier -> an LLM provider, for the jobs that draft through the model (i18n, synt);
    # None where no model is wired (a job then reports that it needs one).
    models: Callable[[str], Any] | None = None


Callback = Callable[[CallbackContext, dict[str, Any]], CallbackResult]


def digest(ctx: CallbackContext, job: str, figures: dict[str, Any], text: str = "") -> CallbackResult:
    """A reading job's findings as a DigestWritten event; ``text``, when there is one, is told on the
    schedule's channel (a job with nothing to tell leaves ``content`` out)."""
    try:
        written = ctx.runtime.log.repository.get(digest_id(job))
    except AggregateNotFoundError:
        written = Digest.open(job=job, at=ctx.now)
    written.write(day=ctx.now.date().isoformat(), figures=figures, text=text, at=ctx.now)
    output: dict[str, Any] = {"ok": True, **figures}
    if text:
        output["content"] = text
    return CallbackResult(ok=True, output=output, aggregates=[written])
