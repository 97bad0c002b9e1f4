"""Read files opened into rows for the *_entries executors (issue 17, item 4)."""

from __future__ import annotations

import pytest

from metnos.runtime.step.piping import PipingError, resolve_args
from metnos.runtime.step.records import file_rows, is_file_list


def f(path: str, content: str) -> dict:
    return {"path": path, "content": content, "size": len(content), "truncated": False}


def test_csv_rows_keep_the_header_and_numbers() -> None:
    rows, kinds = file_rows([f("/h/g.csv", "item,amount,code\nbread,2.50,007\nmilk,1,x\n")])
    assert kinds == "csv"
    assert rows == [{"item": "bread", "amount": 2.5, "code": 7}, {"item": "milk", "amount": 1, "code": "x"}]


def test_tsv_json_jsonl_and_lines() -> None:
    assert file_rows([f("/h/t.tsv", "a\tb\n1\t2\n")])[0] == [{"a": 1, "b": 2}]
    assert file_rows([f("/h/j.json", '[{"a": 1}, {"a": 2}]')])[0] == [{"a": 1}, {"a": 2}]
    assert file_rows([f("/h/j.json", '{"items": [{"a": 1}], "n": 1}')])[0] == [{"a": 1}]
    assert file_rows([f("/h/j.jsonl", '{"a": 1}\n\n{"a": 2}\n')])[0] == [{"a": 1}, {"a": 2}]
    rows, kinds = file_rows([f("/h/todo.md", "- milk\n\n- bread\n")])
    assert kinds == "lines" and rows == [{"line": "- milk", "number": 1}, {"line": "- bread", "number": 3}]


def test_several_files_of_several_kinds() -> None:
    rows, kinds = file_rows([f("/h/a.csv", "x\n1\n"), f("/h/b.txt", "hello\n")])
    assert kinds == "csv+lines" and rows == [{"x": 1}, {"line": "hello", "number": 1}]


def test_only_read_files_are_opened() -> None:
    assert is_file_list([f("/h/a.csv", "x")])
    assert not is_file_list([{"path": "/h/a.csv", "size": 3}])  # found, not read
    assert not is_file_list([])


def test_piping_opens_files_only_for_entries_executors() -> None:
    obs = {1: {"ok": True, "entries": [f("/h/g.csv", "item,amount\nbread,2\n")]}}
    opened = resolve_args({"from_step": 1, "op": "sum"}, obs, current_step=2, rows=True)
    assert opened.args["entries"] == [{"item": "bread", "amount": 2}]
    assert opened.pipings[0].to_json()["records"] == "csv"
    kept = resolve_args({"from_step": 1}, obs, current_step=2)
    assert kept.args["entries"][0]["path"] == "/h/g.csv" and "records" not in kept.pipings[0].to_json()


def test_a_file_that_does_not_parse_says_so() -> None:
    obs = {1: {"ok": True, "entries": [f("/h/bad.json", "{nope")]}}
    with pytest.raises(PipingError, match="bad.json is not valid JSON") as e:
        resolve_args({"from_step": 1}, obs, current_step=2, rows=True)
    assert e.value.code == "bad_json"


def test_a_field_naming_the_file_text_names_each_line() -> None:
    """The 1.5B filtered a log's lines on field "content", the text it saw in read_files's
    entry; opened into lines, that text is each row's "line", and the filter failed three times."""
    obs = {1: {"ok": True, "entries": [f("/h/server.log", "09:00 INFO start\n09:01 ERROR disk\n")]}}
    lines = resolve_args({"from_step": 1, "field": "content", "value": "ERROR"}, obs, current_step=2, rows=True)
    assert lines.args["field"] == "line"
    table = {1: {"ok": True, "entries": [f("/h/g.csv", "content,amount\nbread,2\n")]}}
    assert resolve_args({"from_step": 1, "field": "content"}, table, current_step=2, rows=True).args["field"] == "content"
    assert resolve_args({"from_step": 1, "field": "content"}, obs, current_step=2).args["field"] == "content"
