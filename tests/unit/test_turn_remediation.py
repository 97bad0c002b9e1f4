import pytest

from metnos.runtime.turn.remediation import (
    NEEDS_CONTENT_FETCH, REMEDIATIONS, RemediationContext, RemediationError, RemediationPlan,
    extend_registry, merge_for_retry, plan_remediation,
)
from metnos.runtime.step.shape import NEEDS_ACTION_TARGET, NEEDS_DATA_SOURCE, PIPELINE_ALREADY_CLOSED


def ctx(error_class, **kw):
    base = dict(executor="classify_entries", args={"dimension": "relevance"},
                request_text="classify my mail by relevance", catalogue=frozenset(),
                observation=None, intent_object=None)
    base.update(kw)
    return RemediationContext(error_class=error_class, **base)


def test_registry_holds_the_three_spec_classes():
    assert set(REMEDIATIONS) == {NEEDS_CONTENT_FETCH, NEEDS_DATA_SOURCE, NEEDS_ACTION_TARGET}


def test_data_source_uses_the_objects_primary_tool():
    a = plan_remediation(ctx(NEEDS_DATA_SOURCE, intent_object="messages",
                             catalogue=frozenset({"read_messages", "find_urls"})))
    assert a.kind == "prereq_then_retry" and a.prereq_tool == "read_messages"
    assert a.prereq_args == {} and a.retry_executor == "classify_entries"
    assert a.merge_field == "entries" and a.merge_source == "entries"


def test_data_source_falls_back_to_find_urls_with_the_request():
    a = plan_remediation(ctx(NEEDS_DATA_SOURCE, intent_object="messages", catalogue=frozenset({"find_urls"})))
    assert a.prereq_tool == "find_urls" and a.prereq_args == {"query": "classify my mail by relevance"}
    a2 = plan_remediation(ctx(NEEDS_DATA_SOURCE, intent_object=None, catalogue=frozenset({"find_urls"})))
    assert a2.prereq_tool == "find_urls"


def test_data_source_with_nothing_installed_is_unavailable():
    a = plan_remediation(ctx(NEEDS_DATA_SOURCE, intent_object="messages"))
    assert a.kind == "unavailable" and "no executor" in a.message


def test_action_target_is_a_dialog_never_a_cascade():
    a = plan_remediation(ctx(NEEDS_ACTION_TARGET, executor="delete_files", args={},
                             catalogue=frozenset({"find_files", "find_urls"})))
    assert a.kind == "dialog" and a.prereq_tool == "get_inputs" and a.retry_executor is None
    assert a.prereq_args["verb"] == "delete" and a.prereq_args["object"] == "files"
    assert a.prereq_args["mode"] == "free_text"


def test_content_fetch_takes_the_top_five_urls_of_the_hint():
    urls = [f"https://e{i}.org" for i in range(8)]
    a = plan_remediation(ctx(NEEDS_CONTENT_FETCH, executor="extract_prices",
                             observation={"ok": False, "needs_urls_html": [urls[0]] + urls},
                             catalogue=frozenset({"read_urls_html"})))
    assert a.kind == "prereq_then_retry" and a.prereq_args == {"urls": urls[:5]}


@pytest.mark.parametrize("obs,code", [({"ok": False}, "missing_hint"),
                                      ({"needs_urls_html": "http://x"}, "bad_hint"),
                                      ({"needs_urls_html": []}, "bad_hint")])
def test_content_fetch_bad_hint(obs, code):
    with pytest.raises(RemediationError) as info:
        plan_remediation(ctx(NEEDS_CONTENT_FETCH, observation=obs, catalogue=frozenset({"read_urls_html"})))
    assert info.value.code == code


def test_pipeline_already_closed_forces_final_answer():
    a = plan_remediation(ctx(PIPELINE_ALREADY_CLOSED, executor="read_files"))
    assert a.kind == "force_final_answer" and a.prereq_tool is None
    assert a.to_json()["kind"] == "force_final_answer"


def test_unknown_class_has_no_remediation():
    assert plan_remediation(ctx("needs_ocr")).kind == "none"


def test_registry_extension_is_one_line_and_append_only():
    plan = RemediationPlan(prereq_tool="change_files_ocr", hint_field=None,
                           arg_builder=lambda _h, c: {"paths": c.args.get("paths", [])})
    reg = extend_registry(REMEDIATIONS, "needs_ocr", plan)
    a = plan_remediation(ctx("needs_ocr", args={"paths": ["/a.png"]}, catalogue=frozenset({"change_files_ocr"})),
                         reg)
    assert a.prereq_tool == "change_files_ocr" and a.prereq_args == {"paths": ["/a.png"]}
    assert "needs_ocr" not in REMEDIATIONS
    with pytest.raises(RemediationError):
        extend_registry(reg, NEEDS_DATA_SOURCE, plan)
    with pytest.raises(TypeError):
        REMEDIATIONS["x"] = plan  # type: ignore[index]


def test_merge_for_retry_appends_without_duplicates_and_drops_from_step():
    a = plan_remediation(ctx(NEEDS_DATA_SOURCE, intent_object="messages", catalogue=frozenset({"read_messages"})))
    merged = merge_for_retry({"dimension": "r", "from_step": 1, "entries": [{"id": 1}]},
                             {"ok": True, "entries": [{"id": 1}, {"id": 2}]}, a)
    assert merged == {"dimension": "r", "entries": [{"id": 1}, {"id": 2}]}


@pytest.mark.parametrize("obs,code", [({"ok": False, "error": "x"}, "prereq_failed"),
                                      ({"ok": True, "content": "x"}, "prereq_no_list")])
def test_merge_for_retry_errors(obs, code):
    a = plan_remediation(ctx(NEEDS_DATA_SOURCE, catalogue=frozenset({"find_urls"})))
    with pytest.raises(RemediationError) as info:
        merge_for_retry({}, obs, a)
    assert info.value.code == code


def test_merge_refuses_a_dialog():
    a = plan_remediation(ctx(NEEDS_ACTION_TARGET, executor="delete_files"))
    with pytest.raises(RemediationError):
        merge_for_retry({}, {"ok": True, "entries": []}, a)
