FILES = [
    {"name": "IMG_001.jpg", "path": "/p/2024/IMG_001.jpg", "size": 10},
    {"name": "img_002.JPG", "path": "/p/2023/img_002.JPG", "size": 20},
    {"name": "notes.txt", "path": "/p/2024/notes.txt", "size": 30},
    {"path": "/p/nameless"},
]


def birth_starts_with_ignores_case(run, tmp):
    out = run({"entries": FILES, "predicate": "where_starts_with", "value": "img_"})
    assert [e["name"] for e in out["entries"]] == ["IMG_001.jpg", "img_002.JPG"]
    assert out["metadata"]["missing_field"] == 1 and out["metadata"]["count_in"] == 4
    out = run({"entries": FILES, "predicate": "where_starts_with", "value": "img_", "case_sensitive": True})
    assert [e["name"] for e in out["entries"]] == ["img_002.JPG"]


def birth_contains_and_negate(run, tmp):
    out = run({"entries": FILES, "predicate": "where_contains", "value": "2024", "field": "path"})
    assert [e["path"] for e in out["entries"]] == ["/p/2024/IMG_001.jpg", "/p/2024/notes.txt"]
    out = run({"entries": FILES, "predicate": "where_contains", "value": "2024", "field": "path", "negate": True})
    assert [e["path"] for e in out["entries"]] == ["/p/2023/img_002.JPG", "/p/nameless"]


def birth_glob_and_regex(run, tmp):
    out = run({"entries": FILES, "predicate": "where_glob", "value": "*.jpg"})
    assert len(out["entries"]) == 2
    out = run({"entries": FILES, "predicate": "where_regex", "value": r"^\d+$", "field": "size"})
    assert len(out["entries"]) == 3
    out = run({"entries": FILES, "predicate": "where_regex", "value": r"_00[2-9]\."})
    assert [e["name"] for e in out["entries"]] == ["img_002.JPG"]


def birth_bad_regex(run, tmp):
    out = run({"entries": FILES, "predicate": "where_regex", "value": "(unclosed"})
    assert out["ok"] is False and out["error"]["class"] == "BadPattern"


def birth_a_field_no_entry_has_is_an_error_naming_the_fields(run, tmp):
    out = run({"entries": [{"line": 1, "text": "09:01 ERROR disk"}], "predicate": "where_contains", "value": "ERROR"})
    assert out["ok"] is False and out["error"]["class"] == "NoSuchField", out
    assert "line, text" in out["error"]["message"]
