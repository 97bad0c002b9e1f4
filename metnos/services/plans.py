"""Plans the cascade runs again without the model: list, show, approve, forget (docs/cascade.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from metnos.runtime.cascade.book import PlanBook
from metnos.services import wiring


@contextmanager
def book() -> Iterator[PlanBook]:
    """The plan book on a runtime booted for it, closed after."""
    with wiring.boot(birth=False) as runtime:
        yield PlanBook(runtime)
