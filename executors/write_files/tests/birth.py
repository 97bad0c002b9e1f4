def birth_create_makes_parents(run, tmp):
    out = run({"files": [{"path": "~/notes/new/todo.md", "content": "- milk\n"}]})
    assert out["ok"], out
    assert (tmp / "notes" / "new" / "todo.md").read_text() == "- milk\n"
    assert out["entries"][0]["created"] is True and out["entries"][0]["bytes_written"] == 7


def birth_create_never_clobbers(run, tmp):
    (tmp / "keep.txt").write_text("precious")
    out = run({"files": [{"path": "~/keep.txt", "content": "oops"}]})
    assert out["ok"] is False and out["entries"][0]["error"]["class"] == "Exists"
    assert (tmp / "keep.txt").read_text() == "precious"


def birth_overwrite_and_append(run, tmp):
    (tmp / "f.txt").write_text("old")
    out = run({"files": [{"path": "~/f.txt", "content": "new", "mode": "overwrite"},
                         {"path": "~/f.txt", "content": "+more", "mode": "append"}]})
    assert out["ok"], out
    assert (tmp / "f.txt").read_text() == "new+more"
    assert [e["created"] for e in out["entries"]] == [False, False]
    assert not list(tmp.glob("*.metnos-tmp"))


def birth_no_parents_and_bad_paths(run, tmp):
    out = run({"files": [{"path": "~/nope/x.txt", "content": "x"}, {"path": "rel.txt", "content": "x"},
                         {"path": "~", "content": "x", "mode": "append"}], "make_parents": False})
    classes = [e["error"]["class"] for e in out["entries"]]
    assert classes == ["NotFound", "InvalidPath", "IsADirectory"], classes
    assert out["metadata"]["fail_count"] == 3
