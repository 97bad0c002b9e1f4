"""What the shortlist offers: which executors act (have side effects), and which the turn's autonomy level lets run."""

from __future__ import annotations

from metnos.mechanisms.sandbox import autonomy
from metnos.runtime.step.catalogue import TurnCatalogue


def acts(catalogue: TurnCatalogue, name: str) -> bool:
    """Whether ``name`` (an executor or a builtin) has side effects."""
    found = catalogue.get(name) or catalogue.builtins.get(name)
    return found is not None and bool(found.entry.side_effects)


def offered(catalogue: TurnCatalogue, level: str, name: str) -> bool:
    """Whether the autonomy level lets ``name`` be offered and run (read_only: nothing with side effects)."""
    found = catalogue.get(name) or catalogue.builtins.get(name)
    return found is None or autonomy.offers(level, side_effects=found.entry.side_effects)


def actions_offered(catalogue: TurnCatalogue, pool: list[str]) -> list[str]:
    """The executors with side effects on the shortlist: the actions the request names."""
    return sorted(name for name in pool if acts(catalogue, name))


# The verbs whose action takes existing things as its object (files, events): a search that found
# none of them leaves it nothing to do.
TAKES_WHAT_IT_FINDS = frozenset({"move", "delete"})


def takes_what_it_finds(name: str) -> bool:
    """``name``'s verb (``delete_files``: delete) acts on things that already exist."""
    return name.split("_", 1)[0] in TAKES_WHAT_IT_FINDS
