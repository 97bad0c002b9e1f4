"""The reads a turn opens with, by rules (metnos.runtime.turn.sources)."""

from __future__ import annotations

from metnos.runtime.turn.sources import MAX_OPENING_READS, file_pattern, opening_reads

ALL = {"read_files", "find_files", "get_urls"}


def plan(text: str, available=ALL) -> list[tuple[str, dict]]:
    return [(r.executor, r.args) for r in opening_reads(text, available)]


def test_a_named_text_file_is_read() -> None:
    assert plan("What is the total of the amount column in ~/receipts/groceries.csv?") == [
        ("read_files", {"paths": ["~/receipts/groceries.csv"]})]


def test_a_named_folder_is_listed_with_the_kind_of_file_asked_for() -> None:
    assert plan("Delete the .tmp files in ~/Downloads.") == [("find_files", {"base_path": "~/Downloads", "pattern": "*.tmp"})]
    assert plan("Find the PDF files in ~/Downloads") == [("find_files", {"base_path": "~/Downloads", "pattern": "*.pdf"})]
    assert plan("Which is the largest file in ~/Documents?") == [("find_files", {"base_path": "~/Documents"})]


def test_a_url_is_fetched_as_text_unless_it_is_json() -> None:
    assert plan("What is the headline on http://127.0.0.1:9/news.html?") == [
        ("get_urls", {"urls": ["http://127.0.0.1:9/news.html"], "as_text": True})]
    assert plan("Fetch http://h/weather.json and tell me the temperature.") == [
        ("get_urls", {"urls": ["http://h/weather.json"], "as_text": False})]


def test_a_destination_is_not_read() -> None:
    assert plan("Move the .jpg files on ~/Desktop into ~/Pictures.") == [
        ("find_files", {"base_path": "~/Desktop", "pattern": "*.jpg"})]
    assert plan("Save the text 'call the bank' to ~/notes/bank.md.") == []
    assert plan("Rename ~/Documents/draft.txt to ~/Documents/final.txt.") == [
        ("read_files", {"paths": ["~/Documents/draft.txt"]})]


def test_a_file_that_is_not_text_is_not_read() -> None:
    assert plan("Delete ~/Downloads/old_installer.iso.") == []


def test_only_what_the_catalogue_has_and_in_the_requests_order() -> None:
    assert plan("Read ~/a.md and list ~/b", available={"find_files"}) == [("find_files", {"base_path": "~/b"})]
    assert [e for e, _ in plan("List ~/b then read ~/a.md")] == ["find_files", "read_files"]
    many = " ".join(f"~/f{i}.txt" for i in range(MAX_OPENING_READS + 2))
    assert len(plan(f"Read {many}")) == MAX_OPENING_READS


def test_no_pattern_when_the_request_names_several_kinds() -> None:
    assert file_pattern("move the .jpg and .png files") is None
    assert file_pattern("the markdown files in ~/notes") == "*.md"
    assert file_pattern("files in ~/notes/a.md") is None


# The arguments a list operator was called without (metnos.runtime.turn.completion).

from metnos.runtime.turn.completion import complete_arguments, without_blank_optionals  # noqa: E402

ROWS = [{"date": "2026-03-01", "item": "bread", "amount": 3.2}, {"date": "2026-03-02", "item": "milk", "amount": 1.1}]
FILES = [{"path": "/h/a.pdf", "name": "a.pdf", "size": 10, "modified": "2026-01-01T00:00:00+00:00"}]
COMPUTE = {"op": {"enum": ["sum"]}, "from_step": {"type": "integer"}, "field": {"type": "string"}}
SORT = {"from_step": {"type": "integer"}, "field": {"type": "string"}, "order": {"enum": ["asc", "desc"], "default": "asc"}}


def test_the_field_the_request_names_is_filled_in() -> None:
    args, added = complete_arguments({"op": "sum", "entries": ROWS}, COMPUTE, ROWS, "What is the total of the amount column?")
    assert added == {"field": "amount"} and args["field"] == "amount"


def test_a_field_the_model_gave_is_kept() -> None:
    args, added = complete_arguments({"op": "sum", "field": "item", "entries": ROWS}, COMPUTE, ROWS, "the total amount")
    assert added == {} and args["field"] == "item"


def test_no_field_when_none_or_several_fit() -> None:
    assert complete_arguments({"op": "sum"}, COMPUTE, ROWS, "add them up")[1] == {}
    assert complete_arguments({"op": "sum"}, COMPUTE, ROWS, "the amount of each item")[1] == {}


def test_a_file_list_is_sorted_on_what_largest_or_newest_points_at() -> None:
    assert complete_arguments({}, SORT, FILES, "Which is the largest file in ~/Documents?")[1] == {"field": "size", "order": "desc"}
    assert complete_arguments({}, SORT, FILES, "Which file was modified most recently?")[1] == {"field": "modified", "order": "desc"}
    assert complete_arguments({"field": "size"}, SORT, FILES, "the smallest file")[1] == {}


def test_a_field_with_a_default_is_left_to_the_executor() -> None:
    props = {"field": {"type": "string", "default": "name"}, "value": {"type": "string"}}
    assert complete_arguments({"value": "x"}, props, FILES, "files whose size is big")[1] == {}


def test_only_optional_arguments_left_blank_and_refused_are_dropped() -> None:
    schema = {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string", "minLength": 1}, "dest": {"type": "string", "minLength": 1},
        "tags": {"type": "array", "minItems": 1}, "note": {"type": "string", "minLength": 1}}}
    args = {"path": "", "dest": "", "tags": [], "note": "x"}
    problems = [{"path": "path", "message": "too short"}, {"path": "dest", "message": "too short"},
                {"path": "tags", "message": "too short"}]
    kept, dropped = without_blank_optionals(args, schema, problems)
    # A blank required argument stays (and stays refused); a filled one is never touched.
    assert dropped == ["dest", "tags"] and kept == {"path": "", "note": "x"}
    assert without_blank_optionals({"dest": "x"}, schema, [{"path": "dest", "message": "?"}]) == ({"dest": "x"}, [])
