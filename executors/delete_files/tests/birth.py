import os


def birth_deletes_files_and_links(run, tmp):
    (tmp / "a.txt").write_text("a")
    (tmp / "target.txt").write_text("keep me")
    os.symlink(tmp / "target.txt", tmp / "link")
    out = run({"paths": ["~/a.txt"], "entries": [{"path": str(tmp / "link")}]})
    assert out["ok"], out
    assert [e["type"] for e in out["entries"]] == ["file", "symlink"]
    assert not (tmp / "a.txt").exists() and not os.path.lexists(tmp / "link")
    assert (tmp / "target.txt").read_text() == "keep me"


def birth_folders_need_recursive(run, tmp):
    (tmp / "d" / "sub").mkdir(parents=True)
    (tmp / "d" / "sub" / "f").write_text("x")
    (tmp / "empty").mkdir()
    out = run({"paths": ["~/d", "~/empty"]})
    assert [e.get("error", {}).get("class") for e in out["entries"]] == ["NotEmpty", None]
    assert (tmp / "d" / "sub" / "f").exists() and not (tmp / "empty").exists()
    out = run({"paths": ["~/d"], "recursive": True})
    assert out["ok"] and not (tmp / "d").exists()


def birth_refuses_home_and_reports_missing(run, tmp):
    out = run({"paths": ["~", "~/nothing", "x/y"], "recursive": True})
    assert [e["error"]["class"] for e in out["entries"]] == ["InvalidPath", "NotFound", "InvalidPath"]
    assert tmp.exists()
    assert run({})["error"]["class"] == "NoInput"
