def birth_reads_one_file(run, tmp):
    (tmp / "notes").mkdir()
    (tmp / "notes" / "diary.md").write_text("uno\ndue\ntre\n", encoding="utf-8")
    out = run({"paths": ["~/notes/diary.md"]})
    assert out["ok"], out
    assert out["content"] == "uno\ndue\ntre\n"
    assert out["entries"][0]["lines"] == 3
    assert out["entries"][0]["size"] == 12 and out["entries"][0]["truncated"] is False


def birth_entries_and_truncation(run, tmp):
    (tmp / "a.txt").write_text("a" * 100)
    (tmp / "b.txt").write_text("è" * 10, encoding="utf-8")
    out = run({"entries": [{"path": str(tmp / "a.txt")}, {"path": str(tmp / "b.txt")}], "max_bytes": 5})
    assert out["ok"] and "content" not in out
    a, b = out["entries"]
    assert a["content"] == "aaaaa" and a["truncated"] is True and a["size"] == 100
    assert b["truncated"] is True and b["content"].startswith("èè")


def birth_partial_failure(run, tmp):
    (tmp / "ok.txt").write_text("fine")
    (tmp / "bin").write_bytes(b"\x00\x01\x02")
    out = run({"paths": ["~/ok.txt", "~/missing.txt", "~/bin", "~"]})
    assert out["ok"] is False
    classes = [e.get("error", {}).get("class") for e in out["entries"]]
    assert classes == [None, "NotFound", "Binary", "IsADirectory"], classes
    assert out["metadata"] == {"ok_count": 1, "fail_count": 3}
    assert out["error"]["class"] == "NotFound"


def birth_no_input(run, tmp):
    assert run({})["error"]["class"] == "NoInput"


def birth_an_unknown_encoding_is_refused(run, tmp):
    (tmp / "a.txt").write_text("hello")
    out = run({"paths": ["~/a.txt"], "encoding": "klingon"})
    assert out["ok"] is False and out["error"]["class"] == "UnknownEncoding", out
    assert "'klingon' is not a text encoding" in out["error"]["message"] and "utf-8" in out["error"]["message"]
    assert "entries" not in out
