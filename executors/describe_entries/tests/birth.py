def birth_list_with_title(run, tmp):
    out = run({"title": "Files", "entries": [{"name": "a.jpg", "size": 10}, {"name": "b.jpg"}]})
    assert out["content"] == "**Files**\n\n- name: a.jpg; size: 10\n- name: b.jpg", out["content"]
    assert out["metadata"]["fields"] == ["name", "size"]


def birth_table_escapes_and_limits(run, tmp):
    rows = [{"name": f"f{i}", "note": "a|b"} for i in range(5)]
    out = run({"entries": rows, "format": "table", "fields": ["name", "note"], "max_entries": 2})
    lines = out["content"].splitlines()
    assert lines[0] == "| name | note |" and lines[1] == "|---|---|"
    assert lines[2] == "| f0 | a\\|b |"
    assert lines[-1] == "… and 3 more" and out["metadata"] == {"shown": 2, "omitted": 3, "fields": ["name", "note"]}


def birth_long_values_and_empty(run, tmp):
    out = run({"entries": [{"t": "x" * 500, "n": {"k": 2}, "s": "a\n  b"}], "max_value_chars": 10})
    assert out["content"] == '- t: xxxxxxxxx…; n: {"k": 2}; s: a b', out["content"]
    assert run({"entries": []})["content"] == "(nothing)"


def birth_a_field_no_entry_has_is_refused_with_the_fields_they_have(run, tmp):
    contacts = [{"name": "Ada", "phones": ["+39 347"], "email": ""}, {"name": "Bruno", "phones": []}]
    out = run({"entries": contacts, "format": "table", "fields": ["name", "phone_number"]})
    assert out["ok"] is False and out["error"]["class"] == "NoSuchField", out
    assert "'phone_number'" in out["error"]["message"] and "['name', 'phones']" in out["error"]["message"]
    assert run({"entries": contacts, "fields": ["email"]})["error"]["class"] == "NoSuchField"
    assert run({"entries": contacts, "fields": ["name", "phones"]})["ok"] is True
