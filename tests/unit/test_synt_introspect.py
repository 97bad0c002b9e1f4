"""The introspective cascade's candidates, as pure functions of their evidence."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

from metnos.runtime.synt.introspect import generalise_candidates, merge_candidates, schedule_candidates, specialise_candidates

NOW = datetime(2026, 11, 24, tzinfo=timezone.utc)


def executor(name: str, inputs: dict, outputs: dict, *, side_effects: bool = False) -> SimpleNamespace:
    manifest = SimpleNamespace(verb=name.split("_")[0], contract=SimpleNamespace(side_effects=side_effects),
                               executor=SimpleNamespace(summary=f"{name} does its job."))
    return SimpleNamespace(name=name, manifest=manifest,
                           input_schema={"$ref": "#/definitions/Input", "definitions": {"Input": {"type": "object", "properties": inputs}}},
                           output_schema={"$ref": "#/definitions/Output", "definitions": {"Output": {"type": "object", "properties": outputs}}})


def mnest(src: str, dst: str, *, weight: float, uses: int, state: str = "active") -> dict:
    return {"id": f"{src}>{dst}", "key": f"{src}>{dst}", "src_executor": src, "dst_executor": dst,
            "weight": weight, "uses": uses, "state": state}


def test_merge_needs_a_strong_mnest_overlapping_schemas_and_no_side_effects() -> None:
    loaded = {
        "find_files": executor("find_files", {"base_path": {}}, {"ok": {}, "entries": {}}),
        "sort_entries": executor("sort_entries", {"entries": {}, "by": {}}, {"ok": {}, "entries": {}}),
        "delete_files": executor("delete_files", {"entries": {}}, {"ok": {}}, side_effects=True),
        "get_now": executor("get_now", {"timezone": {}}, {"ok": {}, "content": {}}),
    }
    mnests = {m["id"]: m for m in [
        mnest("find_files", "sort_entries", weight=0.7, uses=12),
        mnest("find_files", "delete_files", weight=0.9, uses=40),   # side effects: never merged
        mnest("get_now", "sort_entries", weight=0.9, uses=40),      # nothing shared
        mnest("sort_entries", "find_files", weight=0.4, uses=40),   # too weak
    ]}
    [only] = merge_candidates(mnests, loaded)
    assert only["executors"] == ["find_files", "sort_entries"]
    assert only["evidence"] == {"mnest": "find_files>sort_entries", "weight": 0.7, "uses": 12, "shared_fields": ["entries"]}
    mnests["find_files>sort_entries"]["uses"] = 9
    assert merge_candidates(mnests, loaded) == []


def test_generalise_finds_a_family_that_differs_by_one_word() -> None:
    same = {"text": {}}
    loaded = {n: executor(n, same, {"ok": {}}) for n in ("render_html_report", "render_pdf_report", "render_pdf_summary")}
    loaded["render_markdown_report"] = executor("render_markdown_report", {"text": {}, "toc": {}}, {"ok": {}})
    out = generalise_candidates(loaded)
    assert out == []  # three members differing in two places is no constant
    del loaded["render_pdf_summary"]
    [only] = generalise_candidates(loaded)
    assert only["executors"] == ["render_html_report", "render_pdf_report"]
    assert only["evidence"]["differs_in"] == ["html", "pdf"]


def test_specialise_needs_30_calls_in_14_days_with_one_value_in_90_percent() -> None:
    recent = (NOW - timedelta(days=2)).isoformat()
    calls = [{"executor": "get_now", "args": {"timezone": "Europe/Rome"}, "timestamp": recent}] * 28
    calls += [{"executor": "get_now", "args": {"timezone": "UTC"}, "timestamp": recent}] * 2
    [only] = specialise_candidates(calls, NOW)
    good = list(calls)
    assert only["evidence"] == {"calls": 30, "argument": "timezone", "value": '"Europe/Rome"', "with_value": 28,
                                "dominance": 0.933, "window_days": 14}
    calls[-3] = {"executor": "get_now", "args": {"timezone": "UTC"}, "timestamp": recent}
    assert specialise_candidates(calls, NOW)[0]["evidence"]["dominance"] == 0.9  # 27/30 still holds
    calls[-4] = calls[-3]
    assert specialise_candidates(calls, NOW) == []  # 26/30 does not
    old = (NOW - timedelta(days=20)).isoformat()
    assert specialise_candidates([{**c, "timestamp": old} for c in good], NOW) == []


def schedule(sid: str, steps: list[str], *, count: int | None = None, status: str = "active") -> dict:
    return {"id": sid, "created": sid, "status": status, "count": count, "cron": "0 8 * * *", "timezone": "UTC", "fired": 3,
            "label": "", "target": {"kind": "chain", "steps": [{"executor": n, "args": {}} for n in steps]}}


def test_a_recurring_chain_without_side_effects_is_a_fusion_candidate() -> None:
    loaded = {
        "find_files": executor("find_files", {"base_path": {}}, {"ok": {}, "entries": {}}),
        "sort_entries": executor("sort_entries", {"entries": {}, "by": {}}, {"ok": {}, "entries": {}}),
        "delete_files": executor("delete_files", {"entries": {}}, {"ok": {}}, side_effects=True),
    }
    schedules = {s["id"]: s for s in [
        schedule("a", ["find_files", "sort_entries"]),
        schedule("b", ["find_files", "sort_entries"], count=5),           # the same chain: proposed once
        schedule("c", ["sort_entries", "find_files"], count=1),           # a one-shot does not recur
        schedule("d", ["find_files", "delete_files"]),                   # side effects: never fused
        schedule("e", ["find_files", "sort_entries", "find_files"], status="paused"),
        schedule("f", ["find_files", "missing_one"]),                    # a step no longer offered
    ]}
    [only] = schedule_candidates(schedules, loaded)
    assert (only["strategy"], only["key"], only["executors"]) == ("merge", "merge:find_files+sort_entries", ["find_files", "sort_entries"])
    assert only["evidence"] == {"schedule": "a", "cron": "0 8 * * *", "timezone": "UTC", "fired": 3, "label": ""}
    assert "find_files then sort_entries" in only["request"]
