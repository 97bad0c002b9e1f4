DIARY = "mon: rain\ntue: sun\nwed: wind\nthu: snow\nfri: fog\n"


def birth_last_three_of_a_file_ending_with_a_newline(run, tmp):
    out = run({"entries": [{"path": "/d.md", "content": DIARY}], "last": 3})
    assert [e["text"] for e in out["entries"]] == ["wed: wind", "thu: snow", "fri: fog"], out
    assert [e["line"] for e in out["entries"]] == [3, 4, 5]
    assert out["content"] == "wed: wind\nthu: snow\nfri: fog"
    assert out["metadata"]["lines_in"] == 5 and out["metadata"]["lines_out"] == 3


def birth_first_and_range_and_crlf(run, tmp):
    out = run({"content": "a\r\nb\r\nc", "first": 1})
    assert out["content"] == "a"
    out = run({"content": DIARY, "start": 2, "end": 3})
    assert out["content"] == "tue: sun\nwed: wind"


def birth_more_than_there_is_and_empty(run, tmp):
    assert run({"content": "x\ny", "last": 10})["content"] == "x\ny"
    out = run({"content": "", "last": 2})
    assert out["ok"] is True and out["entries"] == []


def birth_needs_a_text(run, tmp):
    # Two positions, or none, break the input schema (its oneOf) before the executor runs.
    assert run({"entries": [{"path": "/x"}], "last": 1})["error"]["class"] == "NoInput"


def birth_the_items_of_a_list_in_text(run, tmp):
    todo = "# Todo\n\n- renew the card\n- call Ada\n1. buy stamps\nnotes at the end\n"
    out = run({"content": todo, "first": 1, "items": True})
    assert out["content"] == "renew the card" and out["entries"][0]["line"] == 3, out
    assert run({"content": todo, "last": 2, "items": True})["content"] == "call Ada\nbuy stamps"
