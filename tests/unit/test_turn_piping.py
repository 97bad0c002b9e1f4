import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metnos.runtime.step.piping import Piping, PipingError, list_field_of, placeholders_in, resolve_args

MAILS = [{"from": "a", "subject": "s1"}, {"from": "b", "subject": "s2"}]
OBS = {
    1: {"ok": True, "entries": MAILS, "count": 2},
    2: {"ok": True, "content": "hello", "bytes": 5, "metadata": {"path": "/tmp/x", "tags": ["t0", "t1"]}},
    3: {"ok": False, "error": "boom"},
    4: {"ok": True, "results": [1, 2], "other": [3]},
    5: {"ok": True, "list_field": "items", "items": [{"k": 1}], "entries": [{"k": 2}]},
}


def test_from_step_injects_entries_and_drops_the_reference():
    r = resolve_args({"from_step": 1, "dimension": "relevance", "pre_filter": True}, OBS, current_step=6)
    assert r.args == {"entries": MAILS, "dimension": "relevance", "pre_filter": True}
    assert r.pipings == (Piping(1, "entries", "entries", "from_step"),)


def test_with_step_becomes_with_entries():
    r = resolve_args({"op": "overlap", "from_step": 1, "with_step": 5}, OBS, current_step=6)
    assert r.args["entries"] == MAILS and r.args["with_entries"] == [{"k": 1}]
    assert [p.to_json() for p in r.pipings] == [
        {"src_step": 1, "src_field": "entries", "dst_arg": "entries", "mechanism": "from_step"},
        {"src_step": 5, "src_field": "items", "dst_arg": "with_entries", "mechanism": "with_step"},
    ]


def test_declared_list_field_wins_over_entries():
    assert list_field_of(OBS[5], 5) == "items"


def test_digit_string_step_is_accepted():
    assert resolve_args({"from_step": "1"}, OBS, current_step=2).args["entries"] == MAILS


@pytest.mark.parametrize("value,code", [
    (True, "bad_step_reference"), (0, "bad_step_reference"), ("one", "bad_step_reference"),
    (None, "bad_step_reference"), (9, "future_step"), (3, "step_failed"), (4, "ambiguous_list"),
])
def test_bad_from_step(value, code):
    with pytest.raises(PipingError) as info:
        resolve_args({"from_step": value}, OBS, current_step=6)
    assert info.value.code == code
    json.dumps(info.value.to_json())


def test_from_step_without_a_list():
    with pytest.raises(PipingError) as info:
        resolve_args({"from_step": 2}, OBS, current_step=6)
    assert info.value.code == "no_list"


def test_unknown_step_lists_known_steps():
    with pytest.raises(PipingError) as info:
        resolve_args({"x": "{{step2.content}}"}, {1: OBS[1]}, current_step=5)
    assert info.value.code == "unknown_step" and info.value.detail["known_steps"] == [1]


def test_from_step_and_entries_together_is_refused():
    with pytest.raises(PipingError) as info:
        resolve_args({"from_step": 1, "entries": [{"fake": 1}]}, OBS, current_step=6)
    assert info.value.code == "conflicting_args"


def test_template_keeps_type_and_reports_field():
    r = resolve_args({"path": "/tmp/out.txt", "content": "{{step2.content}}", "n": "{{ step2.bytes }}"},
                     OBS, current_step=3)
    assert r.args == {"path": "/tmp/out.txt", "content": "hello", "n": 5}
    assert r.pipings == (Piping(2, "content", "content", "template"), Piping(2, "bytes", "n", "template"))


@pytest.mark.parametrize("ref,value,field", [
    ("{{step2.metadata.path}}", "/tmp/x", "metadata.path"),
    ("{{step2.metadata.tags.1}}", "t1", "metadata.tags.1"),
    ("{{step2.metadata.tags[0]}}", "t0", "metadata.tags.0"),
    ("{{step1.entries[1].subject}}", "s2", "entries.1.subject"),
])
def test_dotted_paths_and_indices(ref, value, field):
    r = resolve_args({"a": ref}, OBS, current_step=3)
    assert r.args["a"] == value and r.pipings[0].src_field == field


def test_nested_placeholders_report_the_destination_path():
    r = resolve_args({"paths": ["{{step2.metadata.path}}", "/keep"], "opt": {"src": "{{step2.content}}"}},
                     OBS, current_step=3)
    assert r.args == {"paths": ["/tmp/x", "/keep"], "opt": {"src": "hello"}}
    assert [p.dst_arg for p in r.pipings] == ["paths.0", "opt.src"]


@pytest.mark.parametrize("args,code", [
    ({"a": "I wrote {{step2.bytes}} bytes"}, "interpolated_reference"),
    ({"a": "{{step2.nope}}"}, "missing_field"),
    ({"a": "{{step2.metadata.tags.5}}"}, "missing_field"),
    ({"a": "{{step2.content.x}}"}, "missing_field"),
    ({"a": "{{step3.error}}"}, "step_failed"),
    ({"a": "{{step7.content}}"}, "future_step"),
    ({"a": "{{step0.content}}"}, "bad_reference"),
    ({"a": "{{step2.metadata..path}}"}, "bad_reference"),
    ({"a": "{{step2.metadata.tags[x]}}"}, "bad_reference"),
])
def test_reference_errors(args, code):
    with pytest.raises(PipingError) as info:
        resolve_args(args, OBS, current_step=6)
    assert info.value.code == code


def test_missing_field_lists_what_is_available():
    with pytest.raises(PipingError) as info:
        resolve_args({"a": "{{step2.nope}}"}, OBS, current_step=3)
    assert "content" in info.value.detail["available"]


def test_reference_to_the_current_step_is_a_future_step():
    with pytest.raises(PipingError) as info:
        resolve_args({"a": "{{step3.x}}"}, OBS, current_step=3)
    assert info.value.code == "future_step"


def test_input_and_observations_are_not_mutated_nor_aliased():
    args = {"from_step": 1, "c": "{{step2.metadata}}"}
    before = json.dumps(OBS, sort_keys=True)
    r = resolve_args(args, OBS, current_step=3)
    r.args["entries"][0]["from"] = "changed"
    r.args["c"]["path"] = "changed"
    assert json.dumps(OBS, sort_keys=True) == before
    assert args == {"from_step": 1, "c": "{{step2.metadata}}"}


def test_args_without_references_pass_through():
    r = resolve_args({"a": 1, "b": ["x"], "c": "{not a ref}"}, {}, current_step=1)
    assert r.args == {"a": 1, "b": ["x"], "c": "{not a ref}"} and r.pipings == ()


def test_placeholders_in_final_answer():
    assert placeholders_in("I wrote {{step1.bytes_written}} bytes") == ["{{step1.bytes_written}}"]
    assert placeholders_in("I wrote 173 bytes") == []


values = st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none())


@settings(max_examples=120, deadline=None)
@given(st.dictionaries(st.integers(1, 8), st.dictionaries(st.sampled_from(["a", "b", "c"]), values, min_size=1),
                       min_size=1),
       st.data())
def test_property_references_resolve_to_exactly_their_own_step(steps, data):
    observations = {n: {"ok": True, **fields} for n, fields in steps.items()}
    current = max(observations) + 1
    chosen = data.draw(st.lists(
        st.sampled_from([(n, f) for n, fs in steps.items() for f in fs]), min_size=1, max_size=5))
    args = {f"arg{i}": "{{step%d.%s}}" % (n, f) for i, (n, f) in enumerate(chosen)}
    r = resolve_args(args, observations, current_step=current)
    for i, (n, f) in enumerate(chosen):
        assert r.args[f"arg{i}"] == observations[n][f]
    assert [(p.src_step, p.src_field, p.dst_arg) for p in r.pipings] == [
        (n, f, f"arg{i}") for i, (n, f) in enumerate(chosen)]
    # Removing any other step never changes a resolved value.
    for other in observations:
        if all(n != other for n, _ in chosen):
            reduced = {k: v for k, v in observations.items() if k != other}
            assert resolve_args(args, reduced, current_step=current).args == r.args


def test_a_whole_value_that_names_no_step_is_refused_not_written():
    # The 1.5B's online plan, as it wrote it: the placeholder would have landed in the file.
    with pytest.raises(PipingError) as e:
        resolve_args({"files": [{"path": "~/web/menu.txt", "content": "{{get_urls.result}}"}]}, {1: {"ok": True}}, current_step=2)
    assert e.value.code == "bad_reference" and "files.0.content" in e.value.message and "{{stepN.field}}" in e.value.message
    # Braces in text that is no reference stay text.
    for text in ("Hello {{ name }}", "{{ name }}", "a {{b.c}} in a sentence is no whole value".replace("{{b.c}}", "{b.c}")):
        assert resolve_args({"content": text}, {}, current_step=1).args == {"content": text}
