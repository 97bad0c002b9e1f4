"""The seed mnests today's 16 seed executors give, written out by hand.

Written out rather than computed, so that a change in a seed's schema or
name that changes the pairs shows up as a failing test and gets a look.
Every seed is at version 1.0.0.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

# Producers with entries: find_files, get_urls, read_files (sources) and
# filter_entries, filter_lists, sort_entries (they pass entries on).
# Takers of from_step: compute_entries, delete_files, describe_entries,
# filter_entries, filter_lists, move_files, read_files, sort_entries; of
# these delete_files, move_files and read_files read each entry's path,
# which get_urls' entries (web pages) do not have.
# The web: find_urls and read_urls_html give entries with a url; read_urls_html
# takes them (its entries' 'url'), from any producer whose entries may carry one.

EXPECTED_SEED_PAIRS: frozenset[tuple[str, str]] = frozenset({
    ("extract_lines", "compute_entries"), ("extract_lines", "delete_files"), ("extract_lines", "describe_entries"),
    ("extract_lines", "filter_entries"), ("extract_lines", "filter_lists"), ("extract_lines", "move_files"),
    ("extract_lines", "read_files"), ("extract_lines", "sort_entries"),
    ("filter_entries", "extract_lines"), ("filter_lists", "extract_lines"), ("find_files", "extract_lines"),
    ("get_urls", "extract_lines"), ("read_files", "extract_lines"), ("sort_entries", "extract_lines"),
    ("filter_entries", "compute_entries"), ("filter_entries", "delete_files"), ("filter_entries", "describe_entries"),
    ("filter_entries", "filter_lists"), ("filter_entries", "move_files"), ("filter_entries", "read_files"),
    ("filter_entries", "sort_entries"),
    ("filter_lists", "compute_entries"), ("filter_lists", "delete_files"), ("filter_lists", "describe_entries"),
    ("filter_lists", "filter_entries"), ("filter_lists", "move_files"), ("filter_lists", "read_files"),
    ("filter_lists", "sort_entries"),
    ("find_files", "compute_entries"), ("find_files", "delete_files"), ("find_files", "describe_entries"),
    ("find_files", "filter_entries"), ("find_files", "filter_lists"), ("find_files", "move_files"),
    ("find_files", "read_files"), ("find_files", "sort_entries"),
    ("get_urls", "compute_entries"), ("get_urls", "describe_entries"), ("get_urls", "filter_entries"),
    ("get_urls", "filter_lists"), ("get_urls", "sort_entries"),
    ("read_files", "compute_entries"), ("read_files", "delete_files"), ("read_files", "describe_entries"),
    ("read_files", "filter_entries"), ("read_files", "filter_lists"), ("read_files", "move_files"),
    ("read_files", "sort_entries"),
    ("sort_entries", "compute_entries"), ("sort_entries", "delete_files"), ("sort_entries", "describe_entries"),
    ("sort_entries", "filter_entries"), ("sort_entries", "filter_lists"), ("sort_entries", "move_files"),
    ("sort_entries", "read_files"),
    ("find_urls", "compute_entries"), ("find_urls", "describe_entries"), ("find_urls", "extract_lines"),
    ("find_urls", "filter_entries"), ("find_urls", "filter_lists"), ("find_urls", "read_urls_html"),
    ("find_urls", "sort_entries"),
    ("read_urls_html", "compute_entries"), ("read_urls_html", "describe_entries"), ("read_urls_html", "extract_lines"),
    ("read_urls_html", "filter_entries"), ("read_urls_html", "filter_lists"), ("read_urls_html", "sort_entries"),
    ("filter_entries", "read_urls_html"), ("filter_lists", "read_urls_html"), ("get_urls", "read_urls_html"),
    ("sort_entries", "read_urls_html"),
    # Events and contacts are lists with no path: filtered, sorted, counted, described; never read or moved.
    ("read_events", "compute_entries"), ("read_events", "describe_entries"), ("read_events", "extract_lines"),
    ("read_events", "filter_entries"), ("read_events", "filter_lists"), ("read_events", "sort_entries"),
    ("read_contacts", "compute_entries"), ("read_contacts", "describe_entries"), ("read_contacts", "extract_lines"),
    ("read_contacts", "filter_entries"), ("read_contacts", "filter_lists"), ("read_contacts", "sort_entries"),
})
SEED_VERSION = "1.0.0"


def shipped_contracts() -> list[Any]:
    """The shipped seed executors' contracts, resolved as the loader resolves them."""
    from executors import SEED_DIR
    from metnos.mechanisms.executors.manifest import load_manifest
    from metnos.mechanisms.executors.schemas import check_contract_schemas

    out = []
    for folder in sorted(SEED_DIR.iterdir()):
        if not (folder / "manifest.toml").is_file():
            continue
        m = load_manifest(folder / "manifest.toml")
        schemas = check_contract_schemas((folder / "schema.json").read_bytes(), m.contract.input_schema, m.contract.output_schema)
        out.append(SimpleNamespace(name=m.name, version=m.version, input_schema=schemas.input, output_schema=schemas.output))
    return out
