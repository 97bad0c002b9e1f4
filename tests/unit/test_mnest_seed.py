"""The rule that picks the seed mnests (metnos/runtime/mnestome/seed.py), on the real seeds and on made-up contracts."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from metnos.runtime.mnestome.seed import SeedPair, seed_pairs
from tests.support.seed_mnests import EXPECTED_SEED_PAIRS, SEED_VERSION, shipped_contracts

ANY_ENTRY: dict[str, Any] = {"type": "object"}
PATH_ENTRY: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}}
PAGE_ENTRY: dict[str, Any] = {"type": "object", "properties": {"url": {"type": "string"}, "content": {"type": "string"}}}


def contract(name: str, *, takes: dict[str, Any] | None = None, gives: dict[str, Any] | None = None,
             version: str = "1.0.0") -> SimpleNamespace:
    """A contract as the loader resolves it: ``$ref`` into a document, entries through a definition.

    ``takes``/``gives``: the schema of one entry of the input/output ``entries`` list; None for no list.
    """
    inp: dict[str, Any] = {"type": "object", "properties": {"limit": {"type": "integer"}}}
    out: dict[str, Any] = {"type": "object", "properties": {"ok": {"type": "boolean"}, "content": {"type": "string"}}}
    definitions: dict[str, Any] = {"Input": inp, "Output": out}
    if takes is not None:
        definitions["InEntry"] = takes
        inp["properties"]["entries"] = {"type": "array", "items": {"$ref": "#/definitions/InEntry"}}
        inp["required"] = ["entries"]
    if gives is not None:
        definitions["OutEntry"] = gives
        out["properties"]["entries"] = {"type": "array", "items": {"$ref": "#/definitions/OutEntry"}}
    doc = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": definitions}
    return SimpleNamespace(name=name, version=version, input_schema={"$ref": "#/definitions/Input", **doc},
                           output_schema={"$ref": "#/definitions/Output", **doc})


def names(pairs: list[SeedPair]) -> set[tuple[str, str]]:
    return {(p.src, p.dst) for p in pairs}


def test_the_shipped_seeds_give_exactly_the_expected_pairs() -> None:
    pairs = seed_pairs(shipped_contracts())
    assert names(pairs) == EXPECTED_SEED_PAIRS
    assert len(pairs) == len(EXPECTED_SEED_PAIRS) == 84
    assert all(p.src_version == p.dst_version == SEED_VERSION for p in pairs)
    assert pairs == sorted(pairs)


def test_the_shipped_pairs_make_sense() -> None:
    pairs = names(seed_pairs(shipped_contracts()))
    # The flows the runtime is built for.
    assert {("find_files", "filter_entries"), ("filter_entries", "delete_files"), ("find_files", "read_files"),
            ("sort_entries", "describe_entries"), ("get_urls", "filter_entries")} <= pairs
    # Actions and presentations close the pipeline: never a source.
    assert not {src for src, _ in pairs} & {"delete_files", "move_files", "write_files", "send_messages", "describe_entries"}
    # Web pages have no path: nothing to read, move or delete.
    for web in ("get_urls", "find_urls", "read_urls_html"):
        assert not {dst for src, dst in pairs if src == web} & {"read_files", "move_files", "delete_files"}
    # A file has no url: find_files' entries never feed read_urls_html; find_urls' do.
    assert ("find_files", "read_urls_html") not in pairs and ("find_urls", "read_urls_html") in pairs
    # No list in or out: get_now, write_files and send_messages take no part.
    assert not {n for pair in pairs for n in pair} & {"get_now", "write_files", "send_messages"}
    assert all(src != dst for src, dst in pairs)


def test_a_consumer_only_executor_is_only_ever_a_destination() -> None:
    pairs = seed_pairs([
        contract("find_notes", gives=PATH_ENTRY),
        contract("describe_notes", takes=ANY_ENTRY),
    ])
    assert names(pairs) == {("find_notes", "describe_notes")}


def test_a_producer_without_entries_seeds_nothing() -> None:
    pairs = seed_pairs([
        contract("get_weather"),  # content only
        contract("sort_notes", takes=ANY_ENTRY, gives=ANY_ENTRY),
    ])
    assert pairs == []


def test_an_action_is_never_a_source_even_when_it_reports_entries() -> None:
    pairs = seed_pairs([
        contract("move_notes", takes=PATH_ENTRY, gives=PATH_ENTRY),
        contract("filter_notes", takes=ANY_ENTRY, gives=ANY_ENTRY),
        contract("render_notes", takes=ANY_ENTRY, gives=ANY_ENTRY),
    ])
    assert names(pairs) == {("filter_notes", "move_notes"), ("filter_notes", "render_notes")}


def test_entries_must_carry_the_fields_the_destination_reads() -> None:
    pairs = seed_pairs([
        contract("get_pages", gives=PAGE_ENTRY),
        contract("find_notes", gives=PATH_ENTRY),
        contract("sort_notes", takes=ANY_ENTRY, gives=ANY_ENTRY),  # passes on whatever it got
        contract("delete_notes", takes=PATH_ENTRY),
    ])
    assert names(pairs) == {
        ("get_pages", "sort_notes"), ("find_notes", "sort_notes"), ("find_notes", "delete_notes"),
        ("sort_notes", "delete_notes"),
    }


def test_names_outside_the_vocabulary_and_self_pairs_are_left_out() -> None:
    pairs = seed_pairs([
        contract("fetch_notes", gives=PATH_ENTRY),  # "fetch" is not a verb of the vocabulary
        contract("filter_notes", takes=ANY_ENTRY, gives=ANY_ENTRY),
    ])
    assert pairs == []


def test_pairs_carry_each_executors_version() -> None:
    pairs = seed_pairs([
        contract("find_notes", gives=PATH_ENTRY, version="2.1.0"),
        contract("read_notes", takes=PATH_ENTRY, version="1.4.0"),
    ])
    assert pairs == [SeedPair("find_notes", "2.1.0", "read_notes", "1.4.0")]
