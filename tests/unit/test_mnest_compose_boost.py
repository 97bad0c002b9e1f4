"""Synt compose (BFS over the mnestome) and the pre-filter boost, on hand-built states."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from domain.mnest import mnest_id, mnest_key
from metnos.runtime.mnestome import apply_boost, boost, compose, suggest, tags_from_context
from metnos.runtime.mnestome.turn_facts import step_references
from projections.mnestome import top


def mnest(src: str, dst: str, weight: float, *, state: str = "active", uses: int = 3, sv: str = "1.0.0", dv: str | None = "1.0.0", tags=()) -> dict:
    return {
        "id": str(mnest_id(src, sv, dst, dv)), "key": mnest_key(src, sv, dst, dv), "src_executor": src, "src_version": sv,
        "dst_executor": dst, "dst_version": dv, "weight": weight, "uses": uses, "state": state, "tags": list(tags),
        "weight_at": "2026-01-01T00:00:00+00:00", "ts_first": "2026-01-01T00:00:00+00:00", "ts_last": "2026-01-01T00:00:00+00:00",
        "decay_lambda": 0.018, "origin": "observed", "desired_signature": None, "archive_proposed": False,
        "superseded_by": None, "superseded_at": None,
    }


def state_of(*mnests: dict) -> dict:
    return {"mnests": {m["id"]: m for m in mnests}}


GRAPH = state_of(
    mnest("read_files", "extract_text", 0.9),
    mnest("extract_text", "filter_lines", 0.6),
    mnest("extract_text", "compute_summary", 0.7),
    mnest("read_files", "extract_pdf_lines", 0.1),  # too weak to be a path the user walks
    mnest("filter_lines", "write_files", 0.8, state="decaying"),
)


def test_compose_finds_the_shortest_chain_whose_names_carry_the_wanted_words() -> None:
    found = compose(GRAPH, {"name": "extract_lines"}, start="read_files")
    assert found is not None
    assert found["chain"] == ["extract_text", "filter_lines"]
    assert found["weight"] == round(0.9 * 0.6, 6)
    assert found["from"] == "read_files"
    assert found["covers"] == ["extract", "lines"]


def test_compose_answers_none_when_no_chain_closes_the_gap() -> None:
    assert compose(GRAPH, {"name": "extract_invoice_number"}, start="read_files") is None
    # The edge into write_files is decaying, and the weak edge does not count.
    assert compose(GRAPH, {"name": "write_lines"}, start="read_files") is None
    assert compose(GRAPH, {"name": "extract_pdf_lines"}, start="read_files") is None
    # The catalogue can veto an executor the mnestome still remembers.
    assert compose(GRAPH, {"name": "extract_lines"}, start="read_files", catalogue={"extract_text"}) is None


def test_compose_without_a_start_uses_executors_that_share_a_word() -> None:
    found = compose(GRAPH, {"name": "compute_text_summary"})
    assert found is not None
    assert found["from"] == "extract_text"
    assert found["chain"] == ["extract_text", "compute_summary"]
    assert found["mnests"] == [str(mnest_id("extract_text", "1.0.0", "compute_summary", "1.0.0"))]
    # With the start given, its own name does not count: nothing after extract_text says "text".
    assert compose(GRAPH, {"name": "compute_text_summary"}, start="extract_text") is None


def test_suggest_reads_the_step_reference_of_the_call() -> None:
    invoked = {1: ("read_files", "1.0.0")}
    got = suggest(GRAPH, "extract_lines", {"text": "{{step1.content}}"}, invoked, current_step=2)
    assert got is not None
    assert got["kind"] == "compose" and got["from_step"] == 1
    assert got["chain"] == ["extract_text", "filter_lines"]
    assert "extract_text -> filter_lines" in got["message"]
    assert suggest(GRAPH, "extract_lines", {"text": "inline"}, invoked, current_step=2) is None


def test_step_references_finds_every_form() -> None:
    args = {"from_step": 1, "with_step": "2", "opts": {"paths": ["{{ step3.entries.0.path }}"]}, "n": 4}
    assert sorted(step_references(args)) == [(1, "entries", "entries"), (2, "entries", "with_entries"), (3, "entries.0.path", "opts.paths.0")]


RANKING = {
    "query_tokens": ["invoice"], "catalogue_size": 5, "pool_size": 12, "matched": 2, "confidence": "medium", "k": 3,
    "top_score": 2.0, "second_score": 1.5,
    "candidates": [
        {"name": "read_files", "version": "1.0.0", "score": 2.0, "affinity_hits": ["invoice"], "description_hits": [], "via": "rank", "phrase": None},
        {"name": "filter_lines", "version": "1.0.0", "score": 1.5, "affinity_hits": [], "description_hits": ["invoice"], "via": "rank", "phrase": None},
    ],
}


def test_boost_reorders_by_strong_mnests_from_the_context_and_is_replayable() -> None:
    ranked, record = boost(RANKING, GRAPH, ["extract_text"], catalogue={"read_files", "filter_lines", "compute_summary"})
    names = [c["name"] for c in ranked["candidates"]]
    # filter_lines gains 2 x 0.6 = 1.2 and passes read_files; compute_summary (0.7) is added from the catalogue.
    assert names == ["filter_lines", "read_files", "compute_summary"]
    assert ranked["candidates"][0]["score"] == 2.7
    assert ranked["candidates"][2]["via"] == "mnest"
    assert [b["name"] for b in record["boosts"]] == ["compute_summary", "filter_lines"]
    assert apply_boost(RANKING, record) == ranked
    assert RANKING["candidates"][0]["name"] == "read_files", "the input ranking is not modified"
    # Without a catalogue nothing is added; weak and non-active mnests never boost.
    ranked2, record2 = boost(RANKING, GRAPH, ["read_files", "filter_lines"])
    assert record2["boosts"] == []
    assert [c["name"] for c in ranked2["candidates"]] == ["read_files", "filter_lines"]
    assert all(c["name"] != "write_files" for c in ranked2["candidates"])


def test_a_seed_mnest_reorders_the_pool_but_only_a_walked_mnest_widens_it() -> None:
    def seed(src: str, dst: str, *, uses: int = 1) -> dict:
        return {**mnest(src, dst, 0.3, uses=uses), "origin": "seed"}

    catalogue = {"read_files", "filter_lines", "delete_files", "compute_summary"}
    graph = state_of(seed("read_files", "filter_lines"), seed("read_files", "delete_files"),
                     seed("read_files", "compute_summary", uses=2))
    ranked, record = boost(RANKING, graph, ["read_files"], catalogue=catalogue)
    by_name = {c["name"]: c for c in ranked["candidates"]}
    # In the pool already: the seed prior adds 2 x 0.3.
    assert by_name["filter_lines"]["score"] == round(RANKING["candidates"][1]["score"] + 0.6, 4)
    # Out of the pool: a seed never walked adds nothing; one a turn reinforced does.
    assert "delete_files" not in by_name
    assert by_name["compute_summary"]["via"] == "mnest"
    assert [(b["name"], b["added"]) for b in record["boosts"]] == [("compute_summary", True), ("filter_lines", False)]
    assert apply_boost(RANKING, record) == ranked
    # An observed mnest widens the pool even where a seed ranks first (equal weight,
    # ties by source name), and the record names the mnest that widened it.
    graph2 = state_of(seed("filter_lines", "delete_files"), mnest("read_files", "delete_files", 0.3))
    _ranked, record2 = boost(RANKING, graph2, ["read_files", "filter_lines"], catalogue=catalogue)
    assert [(b["name"], b["from"], b["added"]) for b in record2["boosts"]] == [("delete_files", "read_files", True)]
    _ranked, record3 = boost(RANKING, state_of(seed("filter_lines", "delete_files")), ["read_files", "filter_lines"], catalogue=catalogue)
    assert record3["boosts"] == []


def test_boost_with_an_empty_context_changes_only_the_record() -> None:
    ranked, record = boost(RANKING, GRAPH, [])
    assert record["boosts"] == []
    assert ranked["candidates"] == RANKING["candidates"]


@given(st.lists(st.tuples(st.sampled_from(["a_x", "b_y", "c_z", "d_w"]), st.sampled_from(["a_x", "b_y", "c_z", "d_w"]),
                          st.floats(0, 1), st.sampled_from(["active", "decaying", "proto"])), max_size=12),
       st.integers(1, 5))
def test_top_is_sorted_total_and_ignores_input_order(rows, k) -> None:
    ms = [mnest(s, d, w, state=st_, sv=str(i)) for i, (s, d, w, st_) in enumerate(rows)]
    state = state_of(*ms)
    reversed_state = {"mnests": dict(reversed(list(copy.deepcopy(state)["mnests"].items())))}
    got = top(state, k)
    assert got == top(reversed_state, k)
    assert [m["weight"] for m in got] == sorted((m["weight"] for m in got), reverse=True)
    assert len(got) == min(k, len(state["mnests"]))


def test_tags_come_from_the_request_words() -> None:
    assert tags_from_context("Archive the PDF invoice from ~/inbox, please") == ["archive", "pdf", "invoice", "inbox"]
    assert tags_from_context("read it and show me 2026") == []
