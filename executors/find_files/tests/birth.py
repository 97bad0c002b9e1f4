import os


def _tree(tmp):
    (tmp / "pics" / "2024").mkdir(parents=True)
    (tmp / "pics" / "a.jpg").write_bytes(b"x" * 10)
    (tmp / "pics" / "B.JPG").write_bytes(b"y" * 20)
    (tmp / "pics" / "notes.txt").write_text("hello")
    (tmp / "pics" / "2024" / "c.jpg").write_bytes(b"z")
    (tmp / "pics" / ".hidden.jpg").write_bytes(b"h")


def birth_recursive_glob(run, tmp):
    _tree(tmp)
    out = run({"base_path": str(tmp / "pics"), "pattern": "*.jpg"})
    assert out["ok"], out
    names = sorted(e["name"] for e in out["entries"])
    assert names == ["B.JPG", "a.jpg", "c.jpg"], names
    sizes = {e["name"]: e["size"] for e in out["entries"]}
    assert sizes["B.JPG"] == 20 and sizes["a.jpg"] == 10
    assert out["metadata"]["count"] == 3 and out["metadata"]["truncated"] is False


def birth_a_bare_word_is_part_of_the_name(run, tmp):
    _tree(tmp)
    out = run({"base_path": str(tmp / "pics"), "pattern": "JPG"})
    assert sorted(e["name"] for e in out["entries"]) == ["B.JPG", "a.jpg", "c.jpg"], out
    out = run({"base_path": str(tmp / "pics"), "pattern": "notes", "case_sensitive": True})
    assert [e["name"] for e in out["entries"]] == ["notes.txt"], out


def birth_tilde_and_flat(run, tmp):
    _tree(tmp)
    out = run({"base_path": "~/pics", "pattern": "*.jpg", "recursive": False, "case_sensitive": True})
    assert [e["name"] for e in out["entries"]] == ["a.jpg"], out
    assert out["entries"][0]["path"] == os.path.join(str(tmp), "pics", "a.jpg")


def birth_limit_and_hidden(run, tmp):
    _tree(tmp)
    out = run({"base_path": "~/pics", "include_hidden": True, "max_results": 2})
    assert out["metadata"]["truncated"] is True and len(out["entries"]) == 2
    out = run({"base_path": "~/pics", "pattern": ".*", "include_hidden": True})
    assert [e["name"] for e in out["entries"]] == [".hidden.jpg"]


def birth_errors(run, tmp):
    assert run({"base_path": "~/missing"})["error"]["class"] == "NotFound"
    (tmp / "f.txt").write_text("x")
    assert run({"base_path": "~/f.txt"})["error"]["class"] == "NotADirectory"
    assert run({"base_path": "relative/path"})["error"]["class"] == "InvalidPath"
