FILES = [
    {"name": "b", "size": 30, "modified": "2026-01-02"},
    {"name": "A", "size": 10, "modified": "2026-03-01"},
    {"name": "c", "size": 30, "modified": "2025-12-31"},
    {"name": "d"},
    {"name": "e", "size": 5},
]


def birth_numeric_desc_with_limit(run, tmp):
    out = run({"entries": FILES, "field": "size", "order": "desc", "limit": 3})
    assert [e["name"] for e in out["entries"]] == ["b", "c", "A"], out
    assert out["metadata"]["count_out"] == 3 and out["metadata"]["missing_field"] == 1


def birth_missing_go_last_and_stable(run, tmp):
    out = run({"entries": FILES, "field": "size"})
    assert [e["name"] for e in out["entries"]] == ["e", "A", "b", "c", "d"]


def birth_text_case_insensitive(run, tmp):
    out = run({"entries": FILES, "field": "name", "order": "desc"})
    assert [e["name"] for e in out["entries"]] == ["e", "d", "c", "b", "A"]
    out = run({"entries": FILES, "field": "modified"})
    assert [e["name"] for e in out["entries"]][:3] == ["c", "b", "A"]


def birth_mixed_types_do_not_raise(run, tmp):
    out = run({"entries": [{"v": "x"}, {"v": 2}, {"v": [1]}, {"v": 1}], "field": "v"})
    assert [e["v"] for e in out["entries"]] == [1, 2, "x", [1]]
