"""A first call none of whose values the request gave (metnos/runtime/turn/invented.py)."""

from __future__ import annotations

from metnos.runtime.turn.invented import made_up_arguments, unasked_options

CONVERT = {"type": "object", "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}, "into": {"type": "string"}},
           "required": ["amount", "currency", "into"]}


def test_a_call_with_nothing_of_the_request_in_it_is_made_up():
    args = {"amount": 250, "currency": "CHF", "into": "SEK"}
    assert made_up_arguments(args, CONVERT, "Which river is the longest in Africa?") == ("amount", "currency", "into")


def test_one_value_of_the_request_is_enough():
    assert made_up_arguments({"amount": 250, "currency": "CHF", "into": "SEK"}, CONVERT, "Convert 250 of my money") == ()
    assert made_up_arguments({"amount": 7, "currency": "swiss francs", "into": "SEK"}, CONVERT, "how much is it in Swiss money") == ()


def test_numbers_are_found_in_digits_words_percentages_and_scales():
    rate = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
    for value, request in ((5, "five apples"), (5, "cinque mele"), (0.04, "at 4% a year"), (3_000_000, "3 million people"),
                           (2e-6, "a charge of 2e-6"), (1200, "1,200 items"), (10, "the numbers 5,10 and 15"), (2.5, "2,5 kg")):
        assert made_up_arguments({"x": value}, rate, request) == (), (value, request)
    assert made_up_arguments({"x": 6}, rate, "five apples") == ("x",)


def test_words_are_found_by_their_stem_and_not_by_a_stopword():
    kind = {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}
    assert made_up_arguments({"kind": "gardening"}, kind, "books about the garden") == ()
    assert made_up_arguments({"kind": "the cooking"}, kind, "the garden") == ("kind",)
    assert made_up_arguments({"kind": "tea"}, kind, "a team") == ("kind",), "stems are four letters or more"


def test_what_the_tool_offers_the_clock_works_out_or_the_policy_reads_as_a_path_is_not_judged():
    schema = {"type": "object", "required": ["mode", "flag", "level", "day", "folder"], "properties": {
        "mode": {"type": "string", "enum": ["fast", "slow"]}, "flag": {"type": "boolean"}, "level": {"type": "integer", "default": 3},
        "day": {"type": "string"}, "folder": {"type": "string"}}}
    args = {"mode": "fast", "flag": True, "level": 3, "day": "2026-12-04", "folder": "/srv/archive"}
    assert made_up_arguments(args, schema, "what is due on friday?") == ()
    # A flag is not judged even where its schema gives no type.
    assert made_up_arguments({"flag": True}, {"type": "object", "properties": {"flag": {}}, "required": ["flag"]}, "what now?") == ()
    # A program's name is one of the commands the configuration allows: a choice, like an enum's.
    run = {"type": "object", "properties": {"program": {"type": "string", "x-program": True}}, "required": ["program"]}
    assert made_up_arguments({"program": "du"}, run, "how much space does my music take?") == ()
    # A value that differs from the default is judged.
    assert made_up_arguments({**args, "level": 4}, schema, "what is due on friday?") == ("level",)


def test_only_required_arguments_are_judged():
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "units": {"type": "string"}}, "required": ["city"]}
    assert made_up_arguments({"city": "Oslo", "units": "metric"}, schema, "weather in Oslo") == ()
    assert made_up_arguments({"city": "Lima"}, schema, "what is the weather?") == ("city",)
    # No required argument given, or none at all: nothing to judge.
    assert made_up_arguments({"units": "metric"}, schema, "what is the weather?") == ()
    assert made_up_arguments({}, {"type": "object", "properties": {}}, "what time is it?") == ()


def test_lists_and_objects_are_found_by_any_of_their_leaves():
    schema = {"type": "object", "properties": {"messages": {"type": "array"}}, "required": ["messages"]}
    assert made_up_arguments({"messages": [{"to": "anna", "text": "hello there"}]}, schema, "tell Anna I am late") == ()
    assert made_up_arguments({"messages": [{"to": "bob", "text": "hello there"}]}, schema, "tell Anna I am late") == ("messages",)


def test_references_to_steps_are_not_judged():
    schema = {"type": "object", "properties": {"text": {"type": "string"}, "from_step": {"type": "integer"}}, "required": ["text", "from_step"]}
    assert made_up_arguments({"text": "{{step1.text}}", "from_step": 1}, schema, "copy it") == ()


STATS = {"type": "object", "required": ["player"], "properties": {
    "player": {"type": "string"}, "league": {"type": "string"}, "kinds": {"type": "array", "items": {"type": "string"}},
    "season": {"type": "string"}, "limit": {"type": "integer"}, "view": {"type": "string", "enum": ["short", "long"]},
    "calendar": {"type": "string", "x-choices": "calendar.sources"}, "folder": {"type": "string", "format": "path"}}}


def test_an_optional_string_the_request_never_gave_is_unasked():
    request = "the stats of Cristiano Ronaldo in the 2019-2020 season"
    assert unasked_options({"player": "Ronaldo", "league": "Premier League"}, STATS, request) == ("league",)
    assert unasked_options({"player": "Ronaldo", "kinds": ["goals", "assists"]}, STATS, "goals of Ronaldo") == ()
    assert unasked_options({"player": "Ronaldo", "kinds": ["fouls"]}, STATS, request) == ("kinds",)
    # Found by a word or its stem, as a date, or in the conversation known beside the request.
    assert unasked_options({"player": "Ronaldo", "league": "the Italian league"}, STATS, "Ronaldo's goals in Italy's league") == ()
    assert unasked_options({"player": "Ronaldo", "season": "2019-2020"}, STATS, request) == ()


def test_choices_numbers_paths_and_required_values_are_not_unasked():
    args = {"player": "Messi", "limit": 10, "view": "long", "calendar": "home", "folder": "~/sport"}
    assert unasked_options(args, STATS, "how is Ronaldo doing?") == ()
    # A date or a file-name pattern is worked out from words ("next friday", "my photos"), not quoted.
    assert unasked_options({"player": "Messi", "league": "*.jpg", "season": "2026-12-04"}, STATS, "my photos of Messi") == ()


def test_a_programs_arguments_follow_its_syntax_not_the_request():
    run = {"type": "object", "required": ["program"], "properties": {
        "program": {"type": "string", "x-program": True}, "args": {"type": "array", "items": {"type": "string"}}}}
    assert unasked_options({"program": "du", "args": ["-sh", "~/Music"]}, run, "how much space does my music take?") == ()
