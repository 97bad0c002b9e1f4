"""Which quarantined executors a turn ranks, and what it says of them (metnos/runtime/turn/quarantined.py)."""

from __future__ import annotations

from typing import Any

from metnos.mechanisms.executors.loader import LoadReport
from metnos.runtime.step.catalogue import TurnCatalogue
from metnos.runtime.turn.quarantined import find_quarantined, notice, would_have_offered


def _version(state: str, reason: str | None = None, check: str | None = None) -> dict[str, Any]:
    return {"state": state, "digest": "blake3:x", "summary": "", "reason": reason, "check": check, "since": "2026-11-01T00:00:00+00:00"}


def _catalogue_state(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"executors": {f"{e['origin']}/{e['name']}": e for e in entries}, "ids": {}}


def _entry(name: str, origin: str, current: str | None, **versions: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "origin": origin, "id": name, "current": current, "versions": {v.replace("_", "."): s for v, s in versions.items()}}


def test_the_version_in_use_is_the_one_told_and_an_active_name_is_never() -> None:
    state = _catalogue_state(
        # The current version is quarantined: told.
        _entry("read_files", "seed", "1.0.0", **{"1_0_0": _version("quarantined", "main.py: digest failed", "digest")}),
        # An old version is quarantined, the current one is active: nothing is missing.
        _entry("get_now", "seed", "1.1.0", **{"1_0_0": _version("quarantined", "old"), "1_1_0": _version("active")}),
        # Never had a current version: its highest quarantined one.
        _entry("count_words", "synt", None, **{"1_2_0": _version("quarantined", "birth failed", "birth"),
                                                "1_10_0": _version("quarantined", "birth failed again", "birth")}),
        # A synt that took a seed's name while the seed is active: the seed answers to it.
        _entry("find_files", "seed", "1.0.0", **{"1_0_0": _version("active")}),
        _entry("find_files", "synt", None, **{"1_0_0": _version("quarantined", "shadowing", "shadowing")}),
    )
    found = {q.name: q for q in find_quarantined(state, LoadReport())}
    assert sorted(found) == ["count_words", "read_files"]
    assert (found["read_files"].entry.version, found["read_files"].check) == ("1.0.0", "digest")
    # Nothing of read_files loaded or on disk here: the shipped seed's manifest is what is ranked.
    assert found["read_files"].entry.summary.startswith("Read the text of one or more files")
    assert (found["count_words"].entry.version, found["count_words"].reason) == ("1.10.0", "birth failed again")
    # No manifest anywhere: its name alone.
    assert found["count_words"].entry.summary == "count words"


def test_ranked_with_the_live_ones_it_is_told_only_when_it_would_have_made_the_shortlist() -> None:
    state = _catalogue_state(
        _entry("read_files", "seed", "1.0.0", **{"1_0_0": _version("quarantined", "main.py: digest failed", "digest")}),
        _entry("count_words", "synt", "1.0.0", **{"1_0_0": _version("quarantined", "birth failed", "birth")}),
    )
    catalogue = TurnCatalogue([], quarantined=find_quarantined(state, LoadReport()))

    def told(request: str) -> list[str]:
        return [q.name for q in would_have_offered(catalogue, request, level="supervised", pool_size=12)]

    assert told("read ~/notes/a.md") == ["read_files"]
    assert told("count the words of this sentence") == ["count_words"]
    # Where the turn offers the whole catalogue ([turn] offer = "catalogue"), so is it weighed.
    whole = would_have_offered(catalogue, "count the words of this sentence", level="supervised", pool_size=12, offer="catalogue")
    assert [q.name for q in whole] == ["count_words", "read_files"]


def test_an_imported_skill_waiting_for_approval_is_not_told_to_rehabilitate() -> None:
    waiting = {"name": "compute_lines", "version": "1.0.0", "check": "approval",
               "reason": "imported from the skill line-tools; waiting for `metnos skills approve compute_lines`"}
    said = notice(waiting)
    assert said.endswith("waiting for `metnos skills approve compute_lines`. `metnos executors show compute_lines` shows it.")
    assert "rehabilitate" not in said
    assert "`metnos executors rehabilitate read_files` returns it." in notice({**waiting, "name": "read_files", "check": "digest"})
