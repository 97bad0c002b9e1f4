import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metnos.runtime.step.shape import (
    A_VERBS, CHAIN, E_VERBS, F_VERBS, NEEDS_ACTION_TARGET, NEEDS_DATA_SOURCE, PIPELINE_ALREADY_CLOSED,
    START, TERMINAL, ShapeStep, UnknownVerbError, classify, compute_state, has_literal_source, next_state,
)


@pytest.mark.parametrize("name,cat", [
    ("read_files", "E"), ("classify_entries", "E"), ("extract_dates", "E"), ("describe_images", "F"),
    ("render_charts", "F"), ("write_files", "A"), ("compress_files", "A"), ("order_pizzas", "A"),
    ("final_answer", "SYSTEM"), ("undo_last_turn", "SYSTEM"), ("request_new_executor", "SYSTEM"),
    ("admin", "SYSTEM"), ("request_disambiguation_from_user", "SYSTEM"), ("scratchpad_read", "SYSTEM"),
    # the verb decides, never the rest of the name
    ("get_write_permissions", "E"), ("delete_read_markers", "A"),
])
def test_classify_by_verb_prefix(name, cat):
    assert classify(name) == cat


def test_verb_sets_are_the_closed_vocabulary():
    assert len(E_VERBS) == 11 and F_VERBS == {"describe", "render"} and len(A_VERBS) == 11
    assert not (E_VERBS & F_VERBS or E_VERBS & A_VERBS or F_VERBS & A_VERBS)


def test_unknown_verb_is_a_structured_error():
    with pytest.raises(UnknownVerbError) as info:
        classify("frobnicate_things")
    assert info.value.code == "unknown_verb" and info.value.detail["verb"] == "frobnicate"


def test_happy_path_e_e_a():
    t1 = next_state(START, "find_files", {"pattern": "*.jpg"})
    t2 = next_state(t1.state, "filter_entries", {"from_step": 1})
    t3 = next_state(t2.state, "compress_files", {"from_step": 2})
    assert [t.state for t in (t1, t2, t3)] == [CHAIN, CHAIN, TERMINAL]
    assert all(t.error_class is None for t in (t1, t2, t3))


def test_chain_then_f_closes():
    assert next_state(CHAIN, "describe_images", {}).state == TERMINAL


@pytest.mark.parametrize("name,args", [
    ("describe_images", {}), ("render_charts", {"title": "x"}), ("classify_entries", {"dimension": "r"}),
    ("compute_entries", {"op": "count"}),
])
def test_consumer_or_f_without_source_needs_data_source(name, args):
    t = next_state(START, name, args)
    assert t.error_class == NEEDS_DATA_SOURCE and t.state == START


@pytest.mark.parametrize("args", [{}, {"paths": []}, {"path": "  "}, {"force": True}])
def test_action_without_target(args):
    t = next_state(START, "delete_files", args)
    assert t.error_class == NEEDS_ACTION_TARGET and t.state == START


@pytest.mark.parametrize("name,args", [
    ("delete_files", {"paths": ["/x"]}),
    ("write_files", {"path": "/tmp/x", "content": "hi"}),
    ("send_messages", {"messages": [{"to_user": "lucia", "body": "hi"}]}),
])
def test_literal_target_is_an_implicit_e(name, args):
    t = next_state(START, name, args)
    assert t.error_class is None and t.state == TERMINAL


def test_literal_list_makes_consumer_valid_at_start():
    assert next_state(START, "sort_entries", {"entries": [{"a": 1}]}).state == CHAIN
    assert next_state(START, "render_tables", {"rows": [[1]]}).state == TERMINAL


def test_anything_after_terminal_is_already_closed():
    for name in ("read_files", "describe_x", "write_files"):
        t = next_state(TERMINAL, name, {"paths": ["/a"]})
        assert t.error_class == PIPELINE_ALREADY_CLOSED and t.state == TERMINAL


@pytest.mark.parametrize("state", [START, CHAIN, TERMINAL])
def test_system_names_bypass(state):
    t = next_state(state, "final_answer", {})
    assert t.error_class is None and t.state == state and t.category == "SYSTEM"


def test_has_literal_source():
    assert has_literal_source({"from_step": 1}) and has_literal_source({"with_step": 2})
    assert has_literal_source({"paths": ["/x"]}) and not has_literal_source({"paths": [], "p": "x"})


def test_compute_state_skips_failed_and_refused_steps():
    history = [
        ShapeStep("read_files", {"paths": ["/a"]}, succeeded=False),
        ShapeStep("describe_x", {}),  # refused: needs_data_source at START
    ]
    assert compute_state(history) == START
    history.append(ShapeStep("read_files", {"paths": ["/a"]}))
    history.append(ShapeStep("write_files", {"path": "/b"}, succeeded=False))
    assert compute_state(history) == CHAIN
    history.append(ShapeStep("write_files", {"path": "/b"}))
    assert compute_state(history) == TERMINAL


def test_bad_state():
    with pytest.raises(ValueError):
        next_state("WHATEVER", "read_files", {})


NAMES = ["read_a", "find_b", "filter_c", "classify_d", "describe_e", "render_f", "write_g", "delete_h",
         "final_answer", "scratchpad_read"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.booleans()), max_size=12))
def test_property_accepted_sequences_match_the_regex(steps):
    import re
    state = START
    accepted = []
    for name, literal in steps:
        t = next_state(state, name, {"paths": ["/x"]} if literal else {})
        if t.error_class is None:
            state = t.state
            if t.category != "SYSTEM":
                accepted.append((t.category, literal, name.split("_")[0]))
    # Accepted E/F/A calls, with a literal source standing for an implicit E,
    # always spell E+ (F|A)?.
    word = ""
    for i, (cat, literal, verb) in enumerate(accepted):
        if i == 0 and (literal and (cat != "E" or verb in {"filter", "classify"})):
            word += "E"
        word += cat
    assert re.fullmatch(r"(E+(F|A)?)?", word), word
    assert state == (START if not word else TERMINAL if word[-1] in "FA" else CHAIN)
