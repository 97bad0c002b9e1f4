def birth_rename(run, tmp):
    (tmp / "a.txt").write_text("A")
    out = run({"moves": [{"src": "~/a.txt", "dst": "~/b.txt"}]})
    assert out["ok"], out
    assert not (tmp / "a.txt").exists() and (tmp / "b.txt").read_text() == "A"


def birth_into_folder_from_entries(run, tmp):
    for n in ("x.pdf", "y.pdf"):
        (tmp / n).write_text(n)
    out = run({"entries": [{"path": str(tmp / "x.pdf")}, {"path": str(tmp / "y.pdf")}],
               "dest_dir": "~/archive/2024"})
    assert out["ok"] and out["metadata"]["ok_count"] == 2, out
    assert sorted(p.name for p in (tmp / "archive" / "2024").iterdir()) == ["x.pdf", "y.pdf"]


def birth_a_file_named_twice_is_moved_once(run, tmp):
    (tmp / "memo.md").write_text("D")
    out = run({"moves": [{"src": "~/memo.md", "dst": "~/memo-2.md"}], "paths": ["~/memo.md", str(tmp / "memo.md")],
               "dest_dir": "~"})
    assert out["ok"] and out["metadata"]["ok_count"] == 1, out
    assert (tmp / "memo-2.md").read_text() == "D" and not (tmp / "memo.md").exists()


def birth_never_clobbers(run, tmp):
    (tmp / "a").write_text("new")
    (tmp / "b").write_text("old")
    out = run({"moves": [{"src": "~/a", "dst": "~/b"}]})
    assert out["ok"] is False and out["entries"][0]["error"]["class"] == "Exists"
    assert (tmp / "b").read_text() == "old" and (tmp / "a").exists()
    out = run({"moves": [{"src": "~/a", "dst": "~/b"}], "overwrite": True})
    assert out["ok"] and (tmp / "b").read_text() == "new"


def birth_errors(run, tmp):
    (tmp / "d").mkdir()
    out = run({"moves": [{"src": "~/missing", "dst": "~/x"}, {"src": "~/d", "dst": "~/d/inner"}]})
    assert [e["error"]["class"] for e in out["entries"]] == ["NotFound", "InvalidPath"]
    assert run({"paths": ["~/d"]})["error"]["class"] == "NoInput"
