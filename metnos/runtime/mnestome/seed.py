"""Which pairs of seed executors a new workspace's mnestome starts with.

seeds/004 ch. 6 gives seed mnests a bootstrap weight (0.30) but names no
pairs, and a hand-picked list would go stale with the first schema change.
So the pairs are read off the signed contracts of the seed executors: a seed
mnest says "data *can* pass from A to B", the one kind of passing Metnos can
know before any use. A pair (A, B), A != B, qualifies when all hold:

1. B takes a list from an earlier step: its input schema has an ``entries``
   array, which the runtime offers the model as ``from_step`` (seeds/002
   ch. 7.1). Whole lists are what pipelines pass; a ``{{stepN.field}}``
   value can feed almost any argument of any executor, so it would make
   every pair a seed and tell the pre-filter nothing.
2. A gives a list: its output schema has a top-level ``entries`` array, the
   list ``from_step`` injects when a step declares no other.
3. A is a producer, category E of the pipeline shape ``E+ (F | A)?``
   (seeds/002 ch. 4-bis), by its verb. F and A steps close the pipeline:
   nothing may run after them, so a mnest out of one would describe a
   passing the shape forbids, even when (as ``move_files`` does) the action
   reports its outcome as ``entries``.
4. The entries A gives can carry the fields B reads from each entry. B's
   entry schema names what it reads (``delete_files`` reads ``path``); an
   opaque one (``filter_entries``: any object) reads nothing in
   particular. A's entry schema names what each entry has; one that names
   nothing (``sort_entries``: whatever came in) may carry any field. This
   refinement of 1-3 is what keeps ``get_urls``, whose entries are pages
   (``url``, ``status``, ``content``) with no ``path``, from seeding
   mnests to ``read_files``, ``move_files`` and ``delete_files``:
   the shapes allow the passing but the data could never satisfy it.

Only field names are compared: the executor's own schema check on entry
still decides each real call, and a seed mnest that is never walked decays
under the decay threshold within about 23 days anyway.

Seed mnests carry no tags (tags come from a turn's context, and there is
none) and the default decay lambda. The rule is pure: it sees the loaded
contracts (``name``, ``version``, ``input_schema``, ``output_schema``, as
the loader resolves them) and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from metnos.runtime.step.catalogue import inline_refs, tool_parameters
from metnos.runtime.step.piping import FROM_STEP
from metnos.runtime.step.shape import UnknownVerbError, classify

LIST_FIELD = "entries"
# An entry schema that names no fields: it passes on whatever it was given.
ANY_FIELD = None


class SeedExecutor(Protocol):
    """What the rule reads of a loaded executor (a LoadedExecutor fits)."""

    name: str
    version: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]


@dataclass(frozen=True, order=True)
class SeedPair:
    src: str
    src_version: str
    dst: str
    dst_version: str


def seed_pairs(executors: Iterable[SeedExecutor]) -> list[SeedPair]:
    """Every qualifying (A, B) among ``executors`` (one version each), sorted."""
    contracts = list(executors)
    givers = [(c, _entries_given(c.output_schema)) for c in contracts if _is_producer(c.name) and _gives_list(c.output_schema)]
    takers = [(c, _entries_read(c.input_schema)) for c in contracts if _takes_list(c.input_schema)]
    return sorted(
        SeedPair(a.name, a.version, b.name, b.version)
        for a, gives in givers
        for b, reads in takers
        if a.name != b.name and (gives is ANY_FIELD or reads <= gives)
    )


def _is_producer(name: str) -> bool:
    try:
        return classify(name) == "E"
    except UnknownVerbError:
        # A verb outside the vocabulary is a catalogue defect, not a producer.
        return False


def _gives_list(output_schema: Mapping[str, Any]) -> bool:
    entries = _properties(output_schema).get(LIST_FIELD)
    return isinstance(entries, Mapping) and entries.get("type") == "array"


def _takes_list(input_schema: Mapping[str, Any]) -> bool:
    # Asked of the schema as the model is shown it, so the rule and the
    # runtime cannot disagree about which executors take ``from_step``.
    offered = tool_parameters(dict(input_schema)).get("properties") or {}
    return FROM_STEP in offered


def _entries_given(output_schema: Mapping[str, Any]) -> frozenset[str] | None:
    """The fields each output entry is said to have, or ANY_FIELD when it names none."""
    return _item_fields(_properties(output_schema)[LIST_FIELD]) or ANY_FIELD


def _entries_read(input_schema: Mapping[str, Any]) -> frozenset[str]:
    """The fields the executor reads from each piped entry (none named: an opaque list)."""
    return _item_fields(_properties(input_schema).get(LIST_FIELD) or {})


def _properties(schema: Mapping[str, Any]) -> dict[str, Any]:
    resolved = inline_refs(dict(schema), dict(schema))
    props = resolved.get("properties") if isinstance(resolved, dict) else None
    return props if isinstance(props, dict) else {}


def _item_fields(array_schema: Mapping[str, Any]) -> frozenset[str]:
    items = array_schema.get("items")
    props = items.get("properties") if isinstance(items, Mapping) else None
    return frozenset(props) if isinstance(props, Mapping) else frozenset()
