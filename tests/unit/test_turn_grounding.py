"""The grounding check (metnos/runtime/turn/grounding.py): what an answer may claim."""

from __future__ import annotations

import pytest

from metnos.runtime.turn.grounding import (ExactAsk, Grounding, StepData, after_a_loop, check_answer, claims, cut_short, exact_ask, repair_prompt, sort_key,
                                          working_out_call)

DIARY = {"ok": True, "entries": [{"path": "~/notes/diary.md", "content": "mon: rain\ntue: sun\nwed: wind\nthu: snow\nfri: fog\n",
                                  "size": 44, "truncated": False}]}
READ = StepData("read_files", False, DIARY)
LAST3 = StepData("extract_lines", True, {"ok": True, "content": "wed: wind\nthu: snow\nfri: fog", "entries": [
    {"line": 3, "text": "wed: wind"}, {"line": 4, "text": "thu: snow"}, {"line": 5, "text": "fri: fog"}]})
ASK = "read ~/notes/diary.md and tell me the last three lines"
FILES = StepData("find_files", False, {"ok": True, "entries": [
    {"path": "/home/u/notes/a.txt", "name": "a.txt", "size": 120}, {"path": "/home/u/notes/b.md", "name": "b.md", "size": 3000}]})
NOW = StepData("get_now", False, {"ok": True, "iso": "2026-11-28T15:30:12+00:00", "weekday": "Saturday"})


@pytest.mark.parametrize("request_text, expected", [
    (ASK, ExactAsk("lines", "last", 3)),
    ("show me the final 3 lines of ~/log.txt", ExactAsk("lines", "last", 3)),
    ("the last two lines of ~/a.md", ExactAsk("lines", "last", 2)),
    ("give me the last line of ~/a.md", ExactAsk("lines", "last", 1)),
    ("what is the first item in the list", ExactAsk("items", "first", 1)),
    ("dimmi le ultime tre righe di ~/diario.md", ExactAsk("lines", "last", 3)),
    ("le 2 righe finali di ~/x.txt", ExactAsk("lines", "last", 2)),
    ("how does ~/a.md end? show the end of the file", ExactAsk("lines", "last", None)),
    ("which are the 3 largest files in ~/Downloads", ExactAsk("items", "top", 3)),
    ("what time is it", None),
    ("how many files are in ~/docs", None),
    ("read the diary and tell me what it says", None),
])
def test_exact_asks_are_read_from_the_form_of_the_request(request_text: str, expected: ExactAsk | None) -> None:
    assert exact_ask(request_text) == expected


def test_the_last_three_lines_must_be_worked_out_by_a_step() -> None:
    answer = "The last three lines are:\nwed: wind\nthu: snow\nfri: fog"
    only_read = check_answer(answer, request=ASK, steps=[READ])
    assert not only_read.holds and "no step worked them out" in only_read.exactness
    assert check_answer(answer, request=ASK, steps=[READ, LAST3]).holds


def test_five_lines_for_the_last_three_do_not_hold_even_after_a_slice() -> None:
    five = "The last three lines are:\nmon: rain\ntue: sun\nwed: wind\nthu: snow\nfri: fog"
    found = check_answer(five, request=ASK, steps=[READ, LAST3])
    assert found.exactness == "the request asks for the last 3 lines, and the answer gives 5"
    wrong_three = "- tue: sun\n- wed: wind\n- thu: snow"
    found = check_answer(wrong_three, request=ASK, steps=[READ, LAST3])
    assert "'tue: sun' is not among what the step that worked them out returned" in found.exactness


def test_numbers_paths_and_items_must_be_in_a_result_or_the_request() -> None:
    good = "There are 2 files in ~/notes: a.txt (120 bytes) and b.md (3000 bytes)."
    assert check_answer(good, request="list ~/notes", steps=[FILES], home="/home/u").holds
    bad = check_answer("There are 3 files: a.txt, c.txt and b.md (3,500 bytes).", request="list ~/notes", steps=[FILES],
                       home="/home/u")
    assert bad.unmatched == ("c.txt", "3", "3,500")
    listed = check_answer("Files:\n- a.txt\n- notes/zeta.pdf\n- b.md", request="list ~/notes", steps=[FILES], home="/home/u")
    assert listed.unmatched == ("notes/zeta.pdf",)


def test_a_step_the_answer_names_is_no_figure_to_find() -> None:
    # Told "step 1 already made this very call", the 1.5B answered "already completed in step 1": unverified for the 1.
    assert check_answer("The reminder was already made in step 1.", request="remind me every Monday", steps=[], home="/home/u").holds
    assert check_answer("Done at passo 2.", request="x", steps=[], home="/home/u").holds
    assert check_answer("It took 1 step and found 3 files.", request="x", steps=[], home="/home/u").unmatched == ("1", "3")


def test_an_answer_given_with_no_step_names_no_one_and_nowhere_the_request_did_not() -> None:
    # The 0.5B, offered eight tools, called none and answered where the user is.
    ask = "Which town am I in, going by my settings?"
    made_up = check_answer("In the settings, I am in the town of London.", request=ask, steps=[], home="/home/u")
    assert made_up.unmatched == ("London",)
    assert not check_answer("It is Monday, 3 March.", request="what day is it?", steps=[], home="/home/u").holds
    # A name the request gave, a word opening a sentence or a line, a stopword or capitals are not names given.
    assert check_answer("Yes, you are in London.", request="am I in London?", steps=[], home="/home/u").holds
    assert check_answer("Hello! How can I help? Note: The PDF and CSV tools can.", request="hi", steps=[], home="/home/u").holds
    # With a step taken the data says the names, in its own wording: an answer is not held to them.
    location = StepData("get_location", False, {"ok": True, "city": "Lucca"})
    assert check_answer("You are in Lucca, in Tuscany.", request=ask, steps=[location], home="/home/u").holds
    # A turn recorded before the check replays without it.
    assert check_answer("In the settings, I am in the town of London.", request=ask, steps=[], home="/home/u",
                        names_without_steps=False).holds


def test_a_machine_name_must_be_in_a_result_the_request_or_the_tools_names() -> None:
    # The 0.5B answered "from_location: town" to where the user is, with no step run.
    made_up = check_answer("from_location: town", request="Which town am I in, going by my settings?", steps=[], home="/home/u")
    assert made_up.unmatched == ("from_location",)
    location = StepData("get_location", False, {"ok": True, "city": "Lucca", "source": "config_file"})
    found = check_answer("You are in Lucca (source: config_file).", request="Which town am I in?", steps=[location], home="/home/u")
    assert found.holds, found
    # A field's name is known from the data too, and a file's stem inside its path is the path's to check.
    assert check_answer("Its max_results is 5.", request="x", steps=[StepData("x", False, {"max_results": 5})], home="/home/u").holds
    assert check_answer("Files:\n- a.txt\n- b.md", request="list ~/notes", steps=[FILES], home="/home/u").holds
    # What the tools and their arguments are called is the turn's own, not a claim about the data.
    named = "read_files is out of service; its max_bytes could not be set."
    assert check_answer(named, request="x", steps=[], names={"read_files", "max_bytes"}).holds
    assert check_answer(named, request="x", steps=[], names={"read_files"}).unmatched == ("max_bytes",)
    # Named in quotes too: the 1.5B's 'The tool "write_files" was called twice' was held unverified.
    quoted = 'The list now holds coffee. The tool "write_files" was called twice.'
    coffee = StepData("read_files", False, {"ok": True, "content": "coffee"})
    assert check_answer(quoted, request="x", steps=[coffee], names={"write_files"}).holds
    assert check_answer(quoted, request="x", steps=[coffee], names=set()).unmatched == ("write_files",)
    assert check_answer(quoted, request="x", steps=[coffee], names={"write_files"}, quoted_names=False).unmatched == ("write_files",)


def test_a_clock_reading_may_be_said_on_the_twelve_hour_clock_but_not_changed() -> None:
    assert check_answer("It is 3:30 PM on Saturday, November 28, 2026.", request="what time is it", steps=[NOW]).holds
    assert check_answer("It is 4:30 PM.", request="what time is it", steps=[NOW]).unmatched == ("4",)


def test_a_quoted_line_must_be_in_a_result() -> None:
    assert check_answer('It says "wed: wind".', request="what does it say", steps=[READ]).holds
    assert check_answer('It says "wed: storm".', request="what does it say", steps=[READ]).unmatched == ("wed: storm",)


def test_a_count_the_step_made_is_a_number_of_the_results() -> None:
    # Two entries: "2" is the length of the list find_files returned.
    assert check_answer("You have 2 files there.", request="how many files in ~/notes", steps=[FILES]).holds


def test_an_answer_with_no_claims_holds_and_a_failing_one_names_its_parts() -> None:
    assert check_answer("Done, the file is saved.", request="save it", steps=[]).holds
    found = Grounding(unmatched=tuple(str(n) for n in range(10)))
    assert "and 2 more" in found.summary()
    assert "'0'" in repair_prompt(found) and "call the tool that does it first" in repair_prompt(found)


def test_the_call_that_works_an_ask_out_comes_from_the_tools_own_arguments() -> None:
    offered = {"extract_lines": {"entries", "content", "first", "last", "start", "end", "items"},
               "sort_entries": {"entries", "field", "order", "limit"}, "read_files": {"paths"}}
    assert working_out_call(ExactAsk("lines", "last", 3), offered, 1) == {"name": "extract_lines", "arguments": {"from_step": 1, "last": 3}}
    # The first item of a text is the first item of a list in it; the top K of a list come from a sort.
    assert working_out_call(ExactAsk("items", "first", 1), offered, 2, textual=True) == {
        "name": "extract_lines", "arguments": {"from_step": 2, "first": 1, "items": True}}
    # A sort takes the list and the field the request names (the 1.5B's turn got
    # sort_entries {"from_step": 2, "limit": 1} on a slice, refused for its missing field).
    assert working_out_call(ExactAsk("items", "top", 2), offered, 1) == {"name": "sort_entries", "arguments": {"from_step": 1, "limit": 2}}
    assert working_out_call(ExactAsk("items", "top", 2), offered, 2, key=(1, "amount"), order="desc") == {
        "name": "sort_entries", "arguments": {"from_step": 1, "field": "amount", "order": "desc", "limit": 2}}
    assert working_out_call(ExactAsk("lines", "last", 3), {"read_files": {"paths"}}, 1) is None


def test_a_sort_works_on_the_latest_list_with_the_field_the_request_names() -> None:
    csv = {"ok": True, "entries": [{"path": "/h/g.csv", "content": "date,item,amount\n2026-03-01,bread,3.20\n"}]}
    sliced = {"ok": True, "entries": [{"line": 2, "text": "2026-03-01,bread,3.20"}]}
    assert sort_key("Which item in ~/g.csv has the highest amount?", [(1, csv), (2, sliced)]) == (1, "amount")
    assert sort_key("Which is the largest file?", [(1, {"entries": [{"path": "/h/a", "size": 3}]})]) is None
    assert sort_key("the three largest by size", [(1, {"entries": [{"path": "/h/a", "size": 3}]})]) == (1, "size")


def test_a_count_does_not_match_the_digits_of_a_timestamp() -> None:
    listing = StepData("find_files", False, {"ok": True, "entries": [
        {"name": "a.txt", "size": 120, "modified": "2026-11-28T04:17:33+00:00"}]})
    assert check_answer("There are 7 files.", request="list them", steps=[listing]).unmatched == ("7",)
    assert check_answer("a.txt was modified at 04:17 on November 28.", request="when", steps=[listing]).holds


def test_the_highest_read_off_an_ascending_sort_is_the_wrong_end() -> None:
    rows = [{"item": "rice", "amount": 2.35}, {"item": "bread", "amount": 3.2}, {"item": "olive oil", "amount": 12.75}]
    ascending = StepData("sort_entries", True, {"ok": True, "entries": rows, "metadata": {
        "field": "amount", "order": "asc", "count_in": 3, "count_out": 3, "missing_field": 0}})
    request = "which item has the highest amount?"
    wrong = check_answer("The highest is rice, 2.35.", request=request, steps=[ascending])
    assert "'rice' comes from a sort in ascending order" in wrong.exactness
    # Read from the right end of the same sort, the answer stands.
    assert check_answer("The highest is olive oil, 12.75.", request=request, steps=[ascending]).holds
    cut = StepData("sort_entries", True, {"ok": True, "entries": rows[:1], "metadata": {
        "field": "amount", "order": "asc", "count_in": 3, "count_out": 1, "missing_field": 0}})
    assert not check_answer("rice", request=request, steps=[cut]).holds
    assert check_answer("rice", request="which item has the lowest amount?", steps=[cut]).holds


def test_the_one_largest_is_a_top_ask_only_a_sort_answers() -> None:
    # The 1.5B named the first file it listed as "the largest", and the last line of a CSV as "the highest".
    assert exact_ask("Which markdown file in ~/notes was modified most recently?") == ExactAsk("items", "top", 1)
    assert exact_ask("Find the largest file in ~/Downloads and delete it.") == ExactAsk("items", "top", 1)
    assert exact_ask("what is the oldest and the newest file") is None
    files = [{"name": "a.zip", "size": 5000}, {"name": "movie.mkv", "size": 90000}]
    listed = StepData("find_files", False, {"ok": True, "entries": files})
    request = "Which is the largest file in ~/Downloads?"
    assert "no step sorted" in check_answer("The largest is a.zip.", request=request, steps=[listed]).exactness
    sliced = StepData("extract_lines", True, {"ok": True, "entries": [{"line": 7, "text": "rice,2.35"}]})
    assert "no step sorted" in check_answer("rice", request="Which item has the highest amount?", steps=[sliced]).exactness
    ranked = StepData("sort_entries", True, {"ok": True, "entries": files[::-1], "metadata": {
        "field": "size", "order": "desc", "count_in": 2, "count_out": 2}})
    assert check_answer("The largest is movie.mkv.", request=request, steps=[listed, ranked]).holds
    assert "names none of the sort's top: 'movie.mkv'" in check_answer(
        "The largest is a.zip.", request=request, steps=[listed, ranked]).exactness


def test_what_an_exact_answer_quotes_is_what_the_working_out_returned() -> None:
    read = StepData("read_files", False, {"ok": True, "content": "# Todo\n- renew the library card\n- buy stamps"})
    heading = StepData("extract_lines", True, {"ok": True, "entries": [{"line": 1, "text": "# Todo"}], "content": "# Todo"})
    request = "Read ~/lists/things-to-do.md and send its first item to sofia."
    wrong = check_answer('The first item of the list is "renew the library card". It has been sent.', request=request,
                         steps=[read, heading])
    assert "'renew the library card' is not among what the step that worked them out returned" in wrong.exactness
    item = StepData("extract_lines", True, {"ok": True, "entries": [{"line": 2, "text": "renew the library card"}]})
    assert check_answer('The first item is "renew the library card".', request=request, steps=[read, item]).holds


def test_a_list_of_one_has_its_top_without_a_sort() -> None:
    alone = StepData("find_files", False, {"ok": True, "entries": [{"name": "atlas.pdf", "size": 400}]})
    request = "Find the largest PDF in ~/Documents and send its name to luca."
    assert check_answer("Sent atlas.pdf to luca.", request=request, steps=[alone]).holds
    two = StepData("find_files", False, {"ok": True, "entries": [{"name": "atlas.pdf"}, {"name": "tax.pdf"}]})
    assert "no step sorted" in check_answer("Sent atlas.pdf to luca.", request=request, steps=[two]).exactness


def test_an_answer_that_denies_a_file_a_step_read_does_not_hold() -> None:
    read = StepData("read_files", False, {"ok": True, "entries": [
        {"path": "/home/u/notes.md", "content": "buy milk\ncall Anna\n", "size": 19, "lines": 2}]})
    for denial in ("The file notes.md does not exist.", "I could not find ~/notes.md.", "Il file notes.md non esiste.",
                   "Sorry, notes.md is empty."):
        grounding = check_answer(denial, request="read ~/notes.md and tell me what it says", steps=[read], home="/home/u")
        assert grounding.denied == ("notes.md",), denial
        assert not grounding.holds
        assert "cannot be found or read, yet a step found or read it" in grounding.summary()
    assert check_answer("notes.md says: buy milk, call Anna.", request="read ~/notes.md", steps=[read], home="/home/u").holds


def test_saying_a_missing_file_is_missing_holds() -> None:
    missing = StepData("read_files", False, {"ok": False, "entries": [
        {"path": "/home/u/notes.md", "error": {"class": "NotFound", "message": "~/notes.md does not exist"}}]})
    grounding = check_answer("The file ~/notes.md does not exist.", request="read ~/notes.md", steps=[missing], home="/home/u")
    assert grounding.denied == ()
    other = StepData("read_files", False, {"ok": True, "entries": [{"path": "/home/u/a.md", "content": "x"}]})
    assert check_answer("b.md does not exist, a.md says x.", request="read ~/a.md and ~/b.md", steps=[other],
                        home="/home/u").denied == ()


EVENTS = StepData("read_files", False, {"ok": True, "entries": [{"path": "/home/u/logs/events.jsonl", "lines": 5, "content":
    '{"type": "login"}\n{"type": "logout"}\n{"type": "login"}\n{"type": "error"}\n{"type": "login"}\n'}]})


def test_a_count_of_the_lines_that_meet_a_condition_is_worked_out_by_a_step() -> None:
    ask = "Read ~/logs/events.jsonl and tell me how many events have type login."
    guessed = check_answer("5", request=ask, steps=[EVENTS], home="/home/u")
    assert "no step kept only the ones that meet it" in guessed.exactness and not guessed.holds
    everything = StepData("compute_entries", True, {"ok": True, "content": 5, "metadata": {"op": "count", "count_used": 5}})
    assert not check_answer("5", request=ask, steps=[EVENTS, everything], home="/home/u").holds
    kept = StepData("filter_entries", False, {"ok": True, "entries": [{"type": "login"}] * 3})
    assert check_answer("3 events have type login.", request=ask, steps=[EVENTS, kept], home="/home/u").holds
    # A number the text states is no count of a subset ("how many eggs"), and a count of what one asks for in full is none either.
    recipe = StepData("read_files", False, {"ok": True, "entries": [{"path": "/home/u/r.md", "content": "4 eggs, 1 cup milk"}]})
    assert check_answer("4 eggs.", request="How many eggs does the recipe in ~/r.md need?", steps=[recipe], home="/home/u").holds
    assert check_answer("5", request="how many lines does ~/logs/events.jsonl have?", steps=[EVENTS], home="/home/u").exactness == ""


def test_an_answer_that_says_a_file_a_search_found_is_not_there_does_not_hold() -> None:
    found = StepData("find_files", False, {"ok": True, "entries": [
        {"path": "/home/u/Documents/scans/passport.pdf", "name": "passport.pdf", "size": 900}]})
    ask = "Is there a file called passport.pdf somewhere under ~/Documents? Tell me its folder."
    missing = check_answer('The file "passport.pdf" was not found in the specified folder under ~/Documents.', request=ask,
                           steps=[found], home="/home/u")
    assert missing.denied == ("passport.pdf",)
    # A search says the file is there, not what it holds: "could not read it" is not contradicted by it.
    assert check_answer("I could not read passport.pdf.", request=ask, steps=[found], home="/home/u").denied == ()


def test_a_record_set_out_as_json_quotes_its_field_names_which_the_step_returned() -> None:
    events = StepData("read_events", False, {"ok": True, "entries": [
        {"uid": "dentist-1", "summary": "Dentist", "start": "2026-12-01T10:00:00+01:00"}]})
    said = '{"uid": "dentist-1", "summary": "Dentist", "start": "2026-12-01T10:00:00+01:00"}'
    assert check_answer(said, request="what do I have on Tuesday", steps=[events]).holds
    # A field the step did not return is still a claim of the answer's own.
    made_up = '{"uid": "dentist-1", "summary": "Dentist", "room": "4B"}'
    assert check_answer(made_up, request="what do I have on Tuesday", steps=[events]).unmatched == ("room", "4B")


def test_a_slice_call_is_completed_with_the_exact_ask_only_where_it_gives_none() -> None:
    from metnos.runtime.turn.completion import complete_exact_ask
    from metnos.runtime.turn.grounding import exact_ask

    properties = {p: {} for p in ("entries", "content", "first", "last", "start", "end", "items")}
    last_three = exact_ask("read ~/notes/diary.md and tell me the last three lines")
    assert complete_exact_ask({"from_step": 1}, properties, last_three) == ({"from_step": 1, "last": 3}, {"last": 3})
    # The model's own slice stands, and a request with no exact ask changes nothing.
    assert complete_exact_ask({"from_step": 1, "first": 2}, properties, last_three)[1] == {}
    assert complete_exact_ask({"from_step": 1}, properties, None)[1] == {}
    # "The end of the file" gives no count; a tool without the slice's argument is left alone.
    assert complete_exact_ask({"from_step": 1}, properties, exact_ask("show me the end of the file"))[1] == {}
    assert complete_exact_ask({"paths": ["~/a"]}, {"paths": {}}, last_three)[1] == {}
    first_item = exact_ask("What is the first item on my todo list?")
    assert complete_exact_ask({"content": "x"}, properties, first_item)[1] == {"first": 1, "items": True}
    assert complete_exact_ask({"content": "x", "items": False}, properties, first_item)[1] == {"first": 1}


def test_the_last_lines_given_out_of_order_do_not_hold_up() -> None:
    from metnos.runtime.turn.grounding import StepData, check_answer

    diary = "2026-03-01 one\n2026-03-02 two\n2026-03-03 three\n2026-03-04 four\n2026-03-05 five\n"
    read = StepData("read_files", False, {"ok": True, "entries": [{"path": "/h/notes/diary.md", "content": diary}]})
    sliced = StepData("extract_lines", True, {"ok": True, "entries": [
        {"line": n, "text": t} for n, t in ((3, "2026-03-03 three"), (4, "2026-03-04 four"), (5, "2026-03-05 five"))]})
    request = "read ~/notes/diary.md and tell me the last three lines"
    swapped = check_answer("2026-03-04 four\n2026-03-05 five\n2026-03-03 three", request=request, steps=[read, sliced])
    assert not swapped.holds and "another order" in swapped.exactness, swapped
    for right in ("2026-03-03 three\n2026-03-04 four\n2026-03-05 five", "- 2026-03-03 three\n- 2026-03-04 four\n- 2026-03-05 five",
                  "1. 2026-03-03 three\n2. 2026-03-04 four\n3. 2026-03-05 five"):
        assert check_answer(right, request=request, steps=[read, sliced]).holds, right


MUSIC = StepData("find_files", False, {"ok": True, "entries": [
    {"path": "/home/u/Music/a.mp3", "name": "a.mp3", "size": 600000}, {"path": "/home/u/Music/b.mp3", "name": "b.mp3", "size": 900000}]})


@pytest.mark.parametrize("request_text", ["how much disk space does ~/Music take", "what is the total size of the files in ~/Music",
                                          "quanto spazio occupa la cartella ~/Music?"])
def test_a_total_asked_is_not_one_entry_of_several(request_text: str) -> None:
    one = check_answer("Disk space is 600000 bytes.", request=request_text, steps=[MUSIC], home="/home/u")
    assert one.unmatched == () and "600000" in one.exactness and "compute_entries" in one.exactness
    summed = StepData("compute_entries", True, {"ok": True, "content": 1500000, "metadata": {"op": "sum", "field": "size"}})
    assert check_answer("Your music takes 1500000 bytes.", request=request_text, steps=[MUSIC, summed], home="/home/u").holds
    # A listing with each file's size is what was asked when no total is.
    assert check_answer("a.mp3: 600000 bytes; b.mp3: 900000 bytes", request="list the files in ~/Music with their sizes",
                        steps=[MUSIC], home="/home/u").holds


def test_one_entry_of_one_is_its_total() -> None:
    alone = StepData("find_files", False, {"ok": True, "entries": [{"path": "/home/u/Music/a.mp3", "name": "a.mp3", "size": 600000}]})
    assert check_answer("600000 bytes.", request="how much space do my songs take", steps=[alone], home="/home/u").holds


PAGE = StepData("find_urls", False, {"ok": True, "entries": [
    {"text": "Pancake recipe", "url": "http://127.0.0.1:8000/recipes/pancakes.html"},
    {"text": "Risotto recipe", "url": "http://127.0.0.1:8000/recipes/risotto.html"}]})


@pytest.mark.parametrize("request_text", ["give me the links to the recipes on http://127.0.0.1:8000/",
                                          "dammi i link delle ricette su http://127.0.0.1:8000/"])
def test_links_asked_are_given_as_addresses(request_text: str) -> None:
    texts = check_answer("Pancake recipe\nRisotto recipe", request=request_text, steps=[PAGE])
    assert texts.unmatched == () and "none of the 2" in texts.exactness
    assert check_answer("- http://127.0.0.1:8000/recipes/pancakes.html\n- http://127.0.0.1:8000/recipes/risotto.html",
                        request=request_text, steps=[PAGE]).holds
    # Asked for the recipes' names, the texts are the answer.
    assert check_answer("Pancake recipe\nRisotto recipe", request="which recipes does http://127.0.0.1:8000/ have?", steps=[PAGE]).holds
    # Saved to a file, the links are what was done, not what is said.
    saved = StepData("write_files", False, {"ok": True, "entries": [{"path": "/home/u/links.txt", "bytes": 90}]})
    assert check_answer("I saved the 2 links to ~/links.txt.", request=request_text + " and save them to ~/links.txt",
                        steps=[PAGE, saved], home="/home/u").holds


def test_the_page_s_own_address_is_none_of_the_links_on_it() -> None:
    """The 1.5B, asked which links on a page were recipes, answered with the page's address: the fetch's result held it."""
    request_text = "Which links on http://127.0.0.1:8000/links.html are recipes? Give me their addresses."
    fetched = StepData("read_urls_html", False, {"ok": True, "url": "http://127.0.0.1:8000/links.html", "links": [
        {"text": "Pancakes", "url": "http://127.0.0.1:8000/recipes/pancakes.html"},
        {"text": "Gardening", "url": "http://127.0.0.1:8000/garden.html"}]}, "web")
    own = check_answer("http://127.0.0.1:8000/links.html", request=request_text, steps=[fetched])
    assert not own.holds and "none of the 2" in own.exactness
    assert check_answer("http://127.0.0.1:8000/recipes/pancakes.html", request=request_text, steps=[fetched]).holds
    # Recorded before, the page's address was one of the links.
    assert check_answer("http://127.0.0.1:8000/links.html", request=request_text, steps=[fetched], named_data=False).holds


def test_a_listing_of_several_folders_asks_no_total() -> None:
    assert check_answer("a.mp3: 600000 bytes", request="list the files in all my folders under ~/Music with their sizes",
                        steps=[MUSIC], home="/home/u").holds


@pytest.mark.parametrize(("answer", "bare"), [
    ("The last commit in the repository did not change any files.", True),
    ("The last commit in the ~/code/plants repository did not change any files.", True),  # the request's path only
    ("Nothing is different.", True),
    ("The folder has 2 files.", False),
    ("It holds tulips.md.", False),
    ('The first line is "spring".', False),
    ("The folder has 7 files.", True),  # a number no step gave is not something a step found
])
def test_an_answer_after_a_loop_must_name_something_a_step_found(answer: str, bare: bool) -> None:
    listing = {"ok": True, "entries": [{"path": "/home/u/code/plants/tulips.md", "name": "tulips.md", "first": "spring"},
                                       {"path": "/home/u/code/plants/roses.txt", "name": "roses.txt", "first": "spring"}]}
    steps = [StepData("find_files", False, listing)]
    request = "what changed in the git repo ~/code/plants since my last commit?"
    assert (after_a_loop(answer, request, steps, home="/home/u") != "") is bare


def test_what_an_answer_names_to_check() -> None:
    assert claims("The last commit did not change any files.") == []
    assert claims("It holds tulips.md, 3 of them.") == ["tulips.md", "3"]


BUSY = StepData("read_events", False, {"ok": True, "entries": [{"summary": "Review", "start": "2026-12-03T14:00+00:00",
                                                                "end": "2026-12-03T16:00+00:00", "weekday": "Thursday"}],
                                      "busy": [{"start": "2026-12-03T14:00+00:00", "end": "2026-12-03T16:00+00:00"}],
                                      "free": [{"start": "2026-12-03T12:00+00:00", "end": "2026-12-03T14:00+00:00"}],
                                      "is_free": False, "metadata": {"count": 1}})


@pytest.mark.parametrize(("request_text", "answer", "holds"), [
    # The 1.5B's reply on the agent benchmark: the step said is_free false.
    ("Am I free on Thursday afternoon?", "Yes, I am free on Thursday afternoon.", False),
    ("Sono libero giovedì pomeriggio? free", "Sì, sei libero.", False),
    ("Am I free on Thursday afternoon?", "No, you have Review on Thursday from 14:00 to 16:00.", True),
    # "busy" is not what is_free says yes or no to: the answer's yes is not checked against it.
    ("Am I busy on Thursday afternoon?", "Yes, you have Review on Thursday.", True),
    # An answer that does not open with yes or no is left to the other checks.
    ("Am I free on Thursday afternoon?", "You have Review on Thursday from 14:00 to 16:00.", True),
    # "No" and an unaccented "si" count standing alone; before a word they are a determiner and a reflexive.
    ("Sono libero giovedì pomeriggio? free", "Si, sei libero.", False),
    ("Sono libero giovedì pomeriggio? free", "Si tiene Review giovedì.", True),
    ("Am I free on Thursday afternoon?", "No. You have Review on Thursday.", True),
])
def test_a_yes_or_no_must_agree_with_the_step_s_verdict_on_what_was_asked(request_text: str, answer: str, holds: bool) -> None:
    grounding = check_answer(answer, request=request_text, steps=[BUSY], verdict_words={})
    assert grounding.holds is holds, grounding
    if not holds:
        assert "is_free: false" in grounding.exactness and "read_events" in grounding.exactness
    # A turn recorded before the check replays without it.
    assert check_answer(answer, request=request_text, steps=[BUSY], verdicts=False).holds


FREE = StepData("read_events", False, {"ok": True, "entries": [], "busy": [],
                                      "free": [{"start": "2026-12-03T12:00+00:00", "end": "2026-12-03T18:00+00:00"}],
                                      "is_free": True, "metadata": {"count": 0}})


@pytest.mark.parametrize(("answer", "holds"), [
    ("No events on Thursday afternoon: you are free.", True),
    ("Nope, you are busy.", False),
    ("No, you are busy then.", False),
    ("Yes you are free.", True),
])
def test_a_no_that_opens_a_noun_phrase_is_not_a_verdict(answer: str, holds: bool) -> None:
    grounding = check_answer(answer, request="Am I free on Thursday afternoon?", steps=[FREE], verdict_words={})
    assert grounding.holds is holds, grounding


READ_EVENTS_WORDS = {"read_events": {"is_free": frozenset({"free", "libero", "libera", "liberi", "libere"})}}


@pytest.mark.parametrize(("request_text", "answer", "holds"), [
    ("Sono libera giovedì pomeriggio?", "Sì, sei libera giovedì pomeriggio.", False),
    ("Sono libera giovedì pomeriggio?", "No, giovedì hai Review.", True),
    ("Am I free on Thursday afternoon?", "Yes, you are free.", False),
])
def test_a_verdict_is_asked_in_the_words_its_executor_names_for_it(request_text: str, answer: str, holds: bool) -> None:
    grounding = check_answer(answer, request=request_text, steps=[BUSY], verdict_words=READ_EVENTS_WORDS)
    assert grounding.holds is holds, grounding


def test_a_turn_recorded_before_the_verdict_words_reads_its_yes_or_no_as_it_did() -> None:
    # Its "No" before a word was a no, and an Italian request asked no verdict.
    assert not check_answer("No events on Thursday afternoon: you are free.", request="Am I free on Thursday afternoon?", steps=[FREE]).holds
    assert check_answer("Sì, sei libera.", request="Sono libera giovedì pomeriggio?", steps=[BUSY]).holds


_PAGE = StepData("get_urls", False, {"ok": True, "entries": [{"url": "http://127.0.0.1:8000/library.html",
                                                             "content": "The reading room is open until seven in the evening."}]},
                 "web")
_CLOCK = StepData("get_now", False, {"ok": True, "content": "2026-12-02T18:58:37-05:00",
                                     "metadata": {"iso8601": "2026-12-02T18:58:37-05:00"}}, "local")


def test_the_clock_s_reading_does_not_answer_what_a_page_the_turn_read_says() -> None:
    request_text = "Read the article at http://127.0.0.1:8000/library.html and tell me until what time the room is open."
    wrong = check_answer("2026-12-02T18:58:37-05:00", request=request_text, steps=[_PAGE, _CLOCK])
    assert not wrong.holds and "get_now" in wrong.exactness and "library.html" in wrong.exactness
    assert check_answer("Until seven in the evening.", request=request_text, steps=[_PAGE, _CLOCK]).holds
    # Recorded before the check, the answer stood.
    assert check_answer("2026-12-02T18:58:37-05:00", request=request_text, steps=[_PAGE, _CLOCK], named_data=False).holds


def test_the_clock_s_reading_answers_a_request_that_names_no_data_or_one_no_step_read() -> None:
    assert check_answer("2026-12-02T18:58:37-05:00", request="What time is it?", steps=[_CLOCK]).holds
    # The request names a page no step read: nothing to hold the answer to.
    assert check_answer("2026-12-02T18:58:37-05:00", request="What time is it? Then read http://127.0.0.1:8000/x.html",
                        steps=[_CLOCK]).holds
    # The page gives that very value: it is the page's too.
    dated = StepData("read_files", False, {"ok": True, "entries": [{"path": "/home/u/notes/log.md",
                                                                   "content": "last run 2026-12-02T18:58:37-05:00"}]}, "named_file")
    assert check_answer("2026-12-02T18:58:37-05:00", request="When did ~/notes/log.md say it last ran?",
                        steps=[dated, _CLOCK], home="/home/u").holds


def test_a_worked_out_value_is_no_local_reading() -> None:
    read = StepData("read_files", False, {"ok": True, "entries": [{"path": "/home/u/r.csv", "content": "a\n20\n22\n"}]}, "named_file")
    total = StepData("compute_entries", True, {"ok": True, "content": "42"}, "local")
    assert check_answer("42", request="what is the total of ~/r.csv?", steps=[read, total], home="/home/u").holds



# A listing, then a sort that kept only the field it sorted on: the top's date alone holds up as its top.
NOTES = [StepData("find_files", False, {"ok": True, "entries": [
    {"path": "/home/u/notes/plans.md", "name": "plans.md", "modified": "2026-12-02T12:22:29+00:00"},
    {"path": "/home/u/notes/ideas.md", "name": "ideas.md", "modified": "2026-11-20T09:00:00+00:00"}]}, "named_folder"),
    StepData("sort_entries", True, {"ok": True, "metadata": {"field": "modified", "order": "desc", "count_in": 2, "count_out": 1},
                                     "entries": [{"modified": "2026-12-02T12:22:29+00:00"}]}, "local")]


@pytest.mark.parametrize("request_text", ["Which markdown file in ~/notes was modified most recently?",
                                          "what note in ~/notes is the newest?",
                                          "quale file in ~/notes è il più recente?"])
def test_which_file_is_the_newest_is_answered_by_naming_one(request_text: str) -> None:
    """The 0.5B, asked which markdown file was modified most recently, answered only the date."""
    dated = check_answer("The markdown file in ~/notes was modified most recently on 2026-12-02T12:22:29+00:00.",
                         request=request_text, steps=NOTES, home="/home/u")
    assert not dated.holds and "plans.md, ideas.md" in dated.exactness and "find_files" in dated.exactness, dated
    assert check_answer("plans.md, modified on 2026-12-02T12:22:29+00:00.", request=request_text, steps=NOTES, home="/home/u").holds
    # Recorded before, the date alone stood.
    assert check_answer("2026-12-02T12:22:29+00:00", request=request_text, steps=NOTES, home="/home/u", picks_named=False).holds


def test_when_the_newest_file_changed_is_answered_by_its_date() -> None:
    # Not a "which": the date is the answer.
    assert check_answer("2026-12-02T12:22:29+00:00", request="when was the newest file in ~/notes modified?",
                        steps=NOTES, home="/home/u").holds


def test_a_slice_from_the_wrong_end_does_not_answer_the_last_line() -> None:
    """What the 0.5B did: "the last line" sliced as the first five, answered with the first; it stood as answered."""
    request = "what is the last line of ~/notes/diary.md?"
    first_five = StepData("extract_lines", True, {"ok": True, "content": "mon: rain\ntue: sun\nwed: wind\nthu: snow\nfri: fog",
                                                  "entries": [{"line": n, "text": t} for n, t in enumerate(
                                                      ["mon: rain", "tue: sun", "wed: wind", "thu: snow", "fri: fog"], 1)]})
    wrong = check_answer("The last line is: mon: rain", request=request, steps=[READ, first_five])
    assert wrong.exactness == ("the request asks for the last 1 lines, and the answer quotes 'mon: rain', a line of the text "
                               "that is not among them")
    assert check_answer("The last line is: fri: fog", request=request, steps=[READ, first_five]).holds
    # A turn recorded before the check ([runtime] grounding_slice_end off) is judged as it was.
    assert check_answer("The last line is: mon: rain", request=request, steps=[READ, first_five], slice_end=False).holds
    # The first line, asked, is that line; a line quoted from a text cut short says nothing of its end.
    assert check_answer("mon: rain", request="give me the first line of ~/notes/diary.md", steps=[READ, first_five]).holds
    cut = StepData("read_files", False, {"ok": True, "entries": [{**DIARY["entries"][0], "truncated": True}]})
    assert check_answer("The last line is: mon: rain", request=request, steps=[cut, first_five]).holds
    # Three asked, three given from the right end.
    assert check_answer("wed: wind\nthu: snow\nfri: fog", request=ASK, steps=[READ, LAST3]).holds
    # A line elsewhere that is a part of the last one is not quoted by quoting the last.
    echo = {"ok": True, "entries": [{"path": "~/e.txt", "content": "walked the dog\nrain\nwalked the dog twice\n"}]}
    last = StepData("extract_lines", True, {"ok": True, "content": "walked the dog twice",
                                            "entries": [{"line": 3, "text": "walked the dog twice"}]})
    assert check_answer("walked the dog twice", request="the last line of ~/e.txt",
                        steps=[StepData("read_files", False, echo), last]).holds


def test_a_list_a_limit_cut_is_known_as_such() -> None:
    assert cut_short({"ok": True, "entries": [], "metadata": {"count": 1, "truncated": True}})
    assert cut_short({"ok": True, "content": "abc", "truncated": True})
    assert cut_short({"ok": True, "entries": [{"path": "~/a", "content": "a", "truncated": True}]})
    assert not cut_short({"ok": True, "entries": [{"path": "~/a"}], "metadata": {"count": 1, "truncated": False}})
    assert not cut_short({"ok": True, "entries": [{"path": "~/a", "truncated": "no"}]})
    assert not cut_short(["not", "a", "mapping"])


def test_the_top_or_the_end_of_a_list_a_limit_cut_is_not_the_whole() -> None:
    """The 1.5B listed one file of three (max_results 1) and the newest of that one was answered."""
    request = "which markdown file in ~/notes is the newest?"
    one = {"path": "~/notes/a.md", "name": "a.md", "modified": "2026-11-25T06:39:14+00:00"}
    newest = {"path": "~/notes/plans.md", "name": "plans.md", "modified": "2026-12-03T18:39:14+00:00"}
    whole = StepData("find_files", False, {"ok": True, "entries": [one, newest], "metadata": {"truncated": False}})
    cut = StepData("find_files", False, {"ok": True, "entries": [one], "metadata": {"truncated": True}}, partial=True)
    ranked_cut = StepData("sort_entries", True, {"ok": True, "entries": [one], "metadata": {"order": "desc", "count_in": 1,
                                                                                                "count_out": 1}}, partial=True)
    ranked = StepData("sort_entries", True, {"ok": True, "entries": [newest, one], "metadata": {"order": "desc", "count_in": 2,
                                                                                                   "count_out": 2}})
    wrong = check_answer("~/notes/a.md", request=request, steps=[whole, cut, ranked_cut])
    assert wrong.exactness == ("the request asks for the top 1 items, and every step that worked it out (sort_entries) took a "
                               "list a limit cut short: its top and its end need not be the whole's (list it whole, without a limit)")
    assert check_answer("~/notes/plans.md", request=request, steps=[whole, cut, ranked_cut, ranked]).holds
    assert not check_answer("~/notes/a.md", request=request, steps=[whole, cut, ranked_cut, ranked]).holds
    # One entry kept of a listing a limit cut is not "nothing to rank".
    assert check_answer("~/notes/a.md", request=request, steps=[cut]).exactness.startswith("the request asks for the top 1 items, "
                                                                                             "and no step sorted")
    assert check_answer("~/notes/a.md", request=request, steps=[StepData("find_files", False, {"ok": True, "entries": [one]})]).holds
    # The end of a cut list is not the whole's end; its start is the whole's start.
    tail = StepData("extract_lines", True, {"ok": True, "entries": [{"line": 2, "text": "tue: sun"}]}, partial=True)
    assert not check_answer("tue: sun", request="the last line of ~/notes/diary.md", steps=[tail]).holds
    head = StepData("extract_lines", True, {"ok": True, "entries": [{"line": 1, "text": "mon: rain"}]}, partial=True)
    assert check_answer("mon: rain", request="the first line of ~/notes/diary.md", steps=[head]).holds
    # A turn recorded before the check ([runtime] grounding_whole_lists off) is judged as it was.
    assert check_answer("~/notes/a.md", request=request, steps=[whole, cut, ranked_cut], whole_lists=False).holds
    assert check_answer("~/notes/a.md", request=request, steps=[cut], whole_lists=False).holds


def test_a_count_of_a_list_a_limit_cut_is_not_the_whole_count() -> None:
    """A listing that kept five PDFs of twelve (max_results 5) counts five: "how many" is not answered by it."""
    five = [{"path": f"~/docs/r{i}.pdf", "name": f"r{i}.pdf", "size": 10 * i} for i in range(1, 6)]
    twelve = five + [{"path": f"~/docs/s{i}.pdf", "name": f"s{i}.pdf", "size": i} for i in range(1, 8)]
    cut = StepData("find_files", False, {"ok": True, "entries": five, "metadata": {"count": 5, "truncated": True}}, partial=True)
    whole = StepData("find_files", False, {"ok": True, "entries": twelve, "metadata": {"count": 12, "truncated": False}})
    request = "how many PDFs are in ~/docs?"
    wrong = check_answer("There are 5 PDF files in ~/docs.", request=request, steps=[cut])
    assert wrong.exactness == ("the request asks how many, and every list the turn counted from (find_files) was cut short by a "
                               "limit: it counts what the limit kept, not the whole (list it whole: no max_results, or one larger "
                               "than the whole)")
    assert check_answer("There are 12 PDF files in ~/docs.", request=request, steps=[cut, whole]).holds
    # A count worked out of the cut list is cut short too (the step is marked so by piping).
    counted = StepData("compute_entries", True, {"ok": True, "entries": [], "result": 5}, partial=True)
    assert not check_answer("5", request="quanti PDF ci sono in ~/docs?", steps=[cut, counted]).holds
    # A read cut short counts the lines it kept, not the file's.
    read = StepData("read_files", False, {"ok": True, "entries": [{"path": "~/log.txt", "content": "a\nb\n", "truncated": True}]},
                    partial=True)
    assert not check_answer("The log has 2 lines.", request="count the lines of ~/log.txt", steps=[read]).holds
    # A program that counted the whole (ls | wc -l) is a count of the whole.
    wc = StepData("run_commands", False, {"ok": True, "stdout": "12\n", "exit_code": 0})
    assert check_answer("There are 12 PDF files in ~/docs.", request=request, steps=[cut, wc]).holds
    # Not a count: the names of the five kept are still found in the list.
    assert check_answer("~/docs/r1.pdf", request="show me a PDF in ~/docs", steps=[cut]).holds
    # A turn recorded before the check ([runtime] grounding_whole_counts off) is judged as it was.
    assert check_answer("There are 5 PDF files in ~/docs.", request=request, steps=[cut], whole_counts=False).holds
