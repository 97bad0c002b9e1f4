A = [{"path": "/a/1", "n": 1}, {"path": "/a/2", "n": 2}, {"path": "/a/3", "n": 3}]
B = [{"path": "/a/2", "n": 20}, {"path": "/a/4", "n": 4}]


def _paths(out):
    return [e["path"] for e in out["entries"]]


def birth_set_operations(run, tmp):
    assert _paths(run({"op": "intersect", "entries": A, "with_entries": B})) == ["/a/2"]
    assert _paths(run({"op": "difference", "entries": A, "with_entries": B})) == ["/a/1", "/a/3"]
    assert _paths(run({"op": "symdiff", "entries": A, "with_entries": B})) == ["/a/1", "/a/3", "/a/4"]
    out = run({"op": "union", "entries": A, "with_entries": B})
    assert _paths(out) == ["/a/1", "/a/2", "/a/3", "/a/4"]
    assert out["entries"][1]["n"] == 2  # A wins on duplicates
    assert out["metadata"]["key"] == "path" and out["metadata"]["count_out"] == 4


def birth_explicit_key_and_whole_entry(run, tmp):
    out = run({"op": "intersect", "key": "n", "entries": A, "with_entries": [{"n": 3}]})
    assert _paths(out) == ["/a/3"]
    out = run({"op": "intersect", "entries": [{"x": 1}, {"x": 2}], "with_entries": [{"x": 2}]})
    assert out["entries"] == [{"x": 2}] and out["metadata"]["key"] is None


def birth_overlap_autodetects_fields(run, tmp):
    hlt = [
        {"title": "h1", "start": "2026-05-04T09:00:00+02:00", "end": "2026-05-04T10:00:00+02:00"},
        {"title": "h2", "start": "2026-05-04T12:00:00+02:00", "end": "2026-05-04T13:00:00+02:00"},
        {"title": "h3", "start": "2026-05-04T08:00:00Z", "end": "2026-05-04T08:30:00Z"},
        {"title": "bad", "start": "tomorrow", "end": "later"},
    ]
    mnm = [{"title": "m1", "start": "2026-05-04T09:30:00+02:00", "end": "2026-05-04T11:00:00+02:00"},
           {"title": "m2", "start": "2026-05-04T10:15:00+02:00", "end": "2026-05-04T10:45:00+02:00"}]
    out = run({"op": "overlap", "entries": hlt, "with_entries": mnm})
    assert out["ok"], out
    # h3 is 10:00-10:30 in Rome: it overlaps m1 although written in UTC.
    assert [e["title"] for e in out["entries"]] == ["h1", "h3"]
    assert out["metadata"]["start_field"] == "start" and out["metadata"]["skipped"] == 1


def birth_overlap_touching_is_not_overlap(run, tmp):
    a = [{"starts_at": "2026-01-01T10:00:00", "ends_at": "2026-01-01T11:00:00"}]
    b = [{"starts_at": "2026-01-01T11:00:00", "ends_at": "2026-01-01T12:00:00"}]
    assert run({"op": "overlap", "entries": a, "with_entries": b})["entries"] == []
    out = run({"op": "overlap", "entries": [{"x": 1}], "with_entries": [{"y": 2}]})
    assert out["ok"] is False and out["error"]["class"] == "NoTimeFields"
