"""The schema of a planner round's calls (metnos/runtime/turn/call_schema.py) and the grammar made of it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from metnos.mechanisms.llm.constraint import CallConstraint
from metnos.mechanisms.llm.messages import LLMReply, ToolSpec
from metnos.runtime.turn.call_schema import call_schema, planner_constraint

READ = ToolSpec("read_files", "Read text files.", {
    "type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}, "max_bytes": {"type": "integer"}},
    "required": ["paths"]})
COUNT = ToolSpec("count_entries", "Count a list.", {
    "type": "object", "properties": {"from_step": {"type": "integer"}}, "required": ["from_step"]})
SEND = ToolSpec("send_message", "Send a message.", {
    "type": "object", "properties": {"to": {"type": "string"}, "text": {"type": "string"}, "urgent": {"type": "boolean"}},
    "required": ["to", "text"]})
TOOLS = [READ, COUNT, SEND]

# Step 1 listed files (a list to pipe), step 2 read one (a single value), step 3 failed.
OBSERVATIONS = {1: {"ok": True, "entries": [{"path": "~/a.md"}]}, 2: {"ok": True, "content": "hello"}, 3: {"ok": False, "error": "nope"}}


def admits(schema: dict, call: dict) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(call)


@pytest.fixture
def first_round() -> dict:
    return call_schema(TOOLS)


@pytest.fixture
def later_round() -> dict:
    return planner_constraint(TOOLS, OBSERVATIONS, words_only=False).call_schema


def test_it_admits_a_valid_call(first_round: dict) -> None:
    assert admits(first_round, {"name": "read_files", "arguments": {"paths": ["~/notes.md"], "max_bytes": 100}})
    assert admits(first_round, {"name": "send_message", "arguments": {"to": "elena", "text": "late"}})


def test_it_refuses_a_tool_that_was_not_offered(first_round: dict) -> None:
    assert not admits(first_round, {"name": "delete_files", "arguments": {"paths": ["~/notes.md"]}})


def test_it_refuses_one_tools_arguments_under_another_tools_name(first_round: dict) -> None:
    assert not admits(first_round, {"name": "send_message", "arguments": {"paths": ["~/notes.md"]}})


def test_it_refuses_an_argument_of_the_wrong_type(first_round: dict) -> None:
    assert not admits(first_round, {"name": "read_files", "arguments": {"paths": "~/notes.md"}})
    assert not admits(first_round, {"name": "send_message", "arguments": {"to": "elena", "text": "late", "urgent": "yes"}})


def test_it_refuses_a_missing_required_argument(first_round: dict) -> None:
    assert not admits(first_round, {"name": "send_message", "arguments": {"to": "elena"}})
    assert not admits(first_round, {"name": "read_files", "arguments": {}})


def test_it_refuses_an_argument_the_tool_does_not_offer(first_round: dict) -> None:
    assert not admits(first_round, {"name": "read_files", "arguments": {"paths": ["~/a"], "recursive": True}})


def test_it_refuses_anything_but_a_name_and_arguments(first_round: dict) -> None:
    assert not admits(first_round, {"name": "read_files", "arguments": {"paths": ["~/a"]}, "thought": "x"})
    assert not admits(first_round, {"arguments": {"paths": ["~/a"]}})


def test_paths_take_the_forms_the_policy_accepts(first_round: dict) -> None:
    for good in ("~", "~/notes.md", "/home/u/notes.md", "~/My Documents/a [1].txt"):
        assert admits(first_round, {"name": "read_files", "arguments": {"paths": [good]}}), good
    for bad in ("notes.md", "./notes.md", "~/notes/*.md", "/tmp/a?.txt", "~user/x"):
        assert not admits(first_round, {"name": "read_files", "arguments": {"paths": [bad]}}), bad


def test_before_any_list_from_step_is_not_offered(first_round: dict) -> None:
    assert admits(first_round, {"name": "count_entries", "arguments": {}})
    assert not admits(first_round, {"name": "count_entries", "arguments": {"from_step": 1}})


def test_from_step_names_only_an_earlier_step_that_made_a_list(later_round: dict) -> None:
    assert admits(later_round, {"name": "count_entries", "arguments": {"from_step": 1}})
    for step in (2, 3, 4, 0):  # a single value, a failure, a step not run, no step
        assert not admits(later_round, {"name": "count_entries", "arguments": {"from_step": step}}), step
    assert not admits(later_round, {"name": "count_entries", "arguments": {}})


def test_a_whole_value_may_name_a_field_of_an_earlier_good_step(later_round: dict) -> None:
    assert admits(later_round, {"name": "send_message", "arguments": {"to": "elena", "text": "{{step2.content}}"}})
    assert admits(later_round, {"name": "read_files", "arguments": {"paths": ["{{step1.entries.0.path}}"], "max_bytes": "{{step2.content}}"}})
    # Only a field the step holds: step 2 gave a content and no size; step 1's entries have no text.
    assert not admits(later_round, {"name": "read_files", "arguments": {"paths": ["~/a"], "max_bytes": "{{step2.size}}"}})
    assert not admits(later_round, {"name": "send_message", "arguments": {"to": "elena", "text": "{{step1.text}}"}})
    assert not admits(later_round, {"name": "read_files", "arguments": {"paths": ["~/a"], "max_bytes": "{{step3.size}}"}})
    assert not admits(later_round, {"name": "read_files", "arguments": {"paths": ["{{step4.path}}"]}})
    # Before any step ran there is nothing to refer to.
    assert not admits(call_schema(TOOLS), {"name": "read_files", "arguments": {"paths": ["~/a"], "max_bytes": "{{step1.size}}"}})


def test_a_words_only_round_has_no_call() -> None:
    assert planner_constraint(TOOLS, OBSERVATIONS, words_only=True).call_schema is None
    assert planner_constraint([], {}, words_only=False).call_schema is None


def test_the_grammar_embeds_the_schema_and_the_answer() -> None:
    constraint = planner_constraint(TOOLS, OBSERVATIONS, words_only=False)
    grammar = constraint.grammar()
    assert grammar.startswith("%llguidance {}\n") and "start: call | answer" in grammar
    assert '"const": "count_entries"' in grammar and '"enum": [1]' in grammar
    # The name comes before the arguments, as the model should write them.
    assert grammar.index('"name"') < grammar.index('"arguments"')
    words = CallConstraint(None).grammar()
    assert "start: answer" in words and "call" not in words
    assert constraint.digest != CallConstraint(None).digest
    assert constraint.digest == planner_constraint(TOOLS, dict(OBSERVATIONS), words_only=False).digest


def test_a_fenced_call_is_read_back_and_checked() -> None:
    constraint = CallConstraint(call_schema(TOOLS))
    found = constraint.read_reply('```json\n{"name": "read_files", "arguments": {"paths": ["~/a"]}}\n```', call_id="c1", cut_off=False)
    assert found is not None and found.name == "read_files" and found.arguments == {"paths": ["~/a"]} and found.arguments_error is None
    assert constraint.read_reply("The file says hello.", call_id="c1", cut_off=False) is None
    cut = constraint.read_reply('```json\n{"name": "read_files", "arguments": {"paths": ["~/a', call_id="c1", cut_off=True)
    assert cut is not None and cut.arguments == {} and "cut off" in (cut.arguments_error or "")
    off = constraint.read_reply('```json\n{"name": "rm", "arguments": {}}\n```', call_id="c1", cut_off=False)
    assert off is not None and off.name == "rm" and "does not fit" in (off.arguments_error or "")
    assert CallConstraint(None).read_reply('```json\n{"name": "read_files", "arguments": {}}\n```', call_id="c", cut_off=False) is None


def test_a_reply_recorded_before_constraints_keeps_its_record() -> None:
    old = {"text": "hi", "tool_calls": [], "call_form": "none", "raw": {}, "usage": {"input_tokens": 1, "output_tokens": 1},
           "model": "m", "stop_reason": "stop"}
    assert LLMReply.from_record(old).to_record() == old
    new = {**old, "constraint": CallConstraint(None).record(sent=False, why_not="refused")}
    assert LLMReply.from_record(new).to_record() == new


def test_the_online_plan_is_held_to_its_form_over_the_offered_tools() -> None:
    from metnos.runtime.turn.call_schema import plan_constraint
    from metnos.runtime.turn.online import read_plan

    constraint = plan_constraint(TOOLS, recovery=False)
    assert constraint is not None
    good = {"steps": [{"executor": "read_files", "args": {"paths": ["~/a.md"]}},
                      {"executor": "send_message", "args": {"to": "elena", "text": "{{step1.content}}"}}],
            "answer": "Sent: {{step1.content}}"}
    assert admits(constraint.schema, good)
    assert read_plan(__import__("json").dumps(good))["steps"][1]["executor"] == "send_message"
    listed = {"executor": "read_files", "args": {"paths": ["~/a.md"]}}
    assert admits(constraint.schema, {"steps": [listed, {"executor": "count_entries", "args": {"from_step": 1}}], "answer": "{{step2.count}}"})
    # A step names only the steps before it: the 1.5B piped step 1 from step 1.
    assert not admits(constraint.schema, {"steps": [{"executor": "count_entries", "args": {"from_step": 1}}], "answer": ""})
    assert not admits(constraint.schema, {"steps": [listed, {"executor": "count_entries", "args": {"from_step": 2}}], "answer": ""})
    assert not admits(constraint.schema, {"steps": [listed, {"executor": "send_message", "args": {"to": "elena", "text": "{{step2.content}}"}}],
                                          "answer": ""})
    assert not admits(constraint.schema, {"steps": [{"executor": "send_message", "args": {"to": "elena", "text": "{{step1.content}}"}}],
                                          "answer": ""})
    assert not admits(constraint.schema, {"steps": [{"executor": "delete_files", "args": {"paths": ["~/a"]}}], "answer": ""})
    assert not admits(constraint.schema, {"steps": [{"executor": "read_files", "args": {"paths": "~/a"}}], "answer": ""})
    assert not admits(constraint.schema, {"steps": [{"executor": "send_message", "args": {"to": "elena"}}], "answer": ""})
    assert not admits(constraint.schema, {"steps": [{"executor": "count_entries", "args": {"from_step": 0}}], "answer": ""})
    assert not admits(constraint.schema, {"steps": []})
    assert constraint.grammar().startswith("%llguidance {}\nstart: reply_json\n")
    assert constraint.read_reply('{"steps": [], "answer": "x"}', call_id="c", cut_off=False) is None
    # A recovery plan names steps already run in forms of its own: not held.
    assert plan_constraint(TOOLS, recovery=True) is None


# Which of the loop's checks on an answer (answers.py, the placeholder correction) the
# answer grammar leaves nothing to catch, and which it does not.
NAMES = ["read_files", "count_entries"]
SEEN = [{"ok": True, "entries": [{"path": "~/a.md"}]}]


@pytest.mark.parametrize("text, caught_by", [
    ("", "empty"),
    ("  \n", "empty"),
    ('{"ok": true, "content": "alpha"}', "raw_tool_output"),
    ('[{"path": "~/a.md"}]', "raw_tool_output"),
    ('```json\n{"name": "read_files", "arguments": {"paths": ["~/a"]}}\n```', "tool_call_as_text"),
    ('{"name": "read_files", "arguments": {"paths": ["~/a"]}}', "tool_call_as_text"),
    ('<tool_call>{"name": "read_files", "arguments": {}}</tool_call>', "tool_call_as_text"),
    ("The total is {{step1.total}}.", "placeholder"),
])
def test_the_answer_grammar_refuses_what_these_checks_catch(text: str, caught_by: str) -> None:
    import re

    from metnos.mechanisms.llm.constraint import ANSWER_PATTERN
    from metnos.runtime.turn.answers import answer_problem
    from metnos.runtime.step.piping import placeholders_in

    found = "placeholder" if placeholders_in(text) else answer_problem(text, NAMES, SEEN)
    assert found == caught_by
    assert re.fullmatch(ANSWER_PATTERN, text) is None


@pytest.mark.parametrize("text, caught_by", [
    ("read_files", "tool_name"),
    ("read_files(paths=['~/a.md'])", "tool_call_as_text"),
    ("Here is what I found:", "stub"),
])
def test_the_answer_grammar_still_admits_what_these_checks_catch(text: str, caught_by: str) -> None:
    import re

    from metnos.mechanisms.llm.constraint import ANSWER_PATTERN
    from metnos.runtime.turn.answers import answer_problem

    assert answer_problem(text, NAMES, SEEN) == caught_by
    assert re.fullmatch(ANSWER_PATTERN, text) is not None


def test_a_tool_of_exclusive_forms_admits_one_form_never_both() -> None:
    from metnos.runtime.step.catalogue import builtin_tools
    schedule = builtin_tools()["schedule_recurring"].tool
    schema = call_schema([schedule])
    one = {"name": "schedule_recurring", "arguments": {"executor": "send_messages", "args": {}, "cron": "0 8 * * *"}}
    chain = {"name": "schedule_recurring", "arguments": {"chain": [{"executor": "get_now"}], "cron": "0 8 * * *"}}
    both = {"name": "schedule_recurring", "arguments": {"executor": "send_messages", "chain": [{"executor": "get_now"}],
                                                          "cron": "0 8 * * *"}}
    neither = {"name": "schedule_recurring", "arguments": {"cron": "0 8 * * *"}}
    assert admits(schema, one) and admits(schema, chain)
    assert not admits(schema, both) and not admits(schema, neither)
    assert len(schema["anyOf"]) == 2 and all("oneOf" not in b["properties"]["arguments"] for b in schema["anyOf"])
    grammar = CallConstraint(schema).grammar()
    assert grammar.count('"const":"schedule_recurring"') == 2 or grammar.count('"const": "schedule_recurring"') == 2


def test_the_scheduling_tool_names_its_exclusive_forms_when_given_both() -> None:
    from metnos.runtime.step.schedule_tools import call_tool
    refused = call_tool(None, "schedule_recurring", {"executor": "a", "chain": [{"executor": "b"}], "cron": "0 8 * * *"})
    assert refused["ok"] is False and refused["error"]["kind"] == "BadArguments"
    assert refused["error"]["message"] == "give exactly one of executor or chain"


def test_free_text_holds_no_placeholder_but_a_whole_reference_to_a_good_step(later_round: dict) -> None:
    # What the 0.5B wrote under the grammar before: piping refuses it after the call.
    send = {"name": "send_message", "arguments": {"to": "anna", "text": "{{from_step.content}}"}}
    inside = {"name": "send_message", "arguments": {"to": "anna", "text": "total: {{step2.content}}"}}
    whole = {"name": "send_message", "arguments": {"to": "anna", "text": "{{step2.content}}"}}
    braces = {"name": "send_message", "arguments": {"to": "anna", "text": "a set {1, 2} and a { alone"}}
    assert not admits(later_round, send) and not admits(later_round, inside)
    assert admits(later_round, whole) and admits(later_round, braces)
    assert not admits(call_schema(TOOLS), whole)



def test_bounds_the_prompt_leaves_out_hold_in_the_grammar() -> None:
    lines = ToolSpec("extract_lines", "Lines by position.", {"type": "object", "properties": {"first": {"type": "integer"}}},
                     grammar_parameters={"type": "object", "properties": {"first": {"type": "integer", "minimum": 1}}})
    schema = call_schema([lines])
    assert admits(schema, {"name": "extract_lines", "arguments": {"first": 1}})
    assert not admits(schema, {"name": "extract_lines", "arguments": {"first": 0}})


def test_a_scheduled_call_is_held_to_the_schema_of_an_offered_executor() -> None:
    from metnos.runtime.step.catalogue import builtin_tools
    schedule = builtin_tools()["schedule_recurring"].tool
    schema = call_schema([schedule, SEND])
    good = {"name": "schedule_recurring", "arguments": {"executor": "send_message", "cron": "0 8 * * *",
                                                        "args": {"to": "me", "text": "take the vitamins"}}}
    assert admits(schema, good)
    # The cron inside the args (what the 1.5B wrote), an executor not offered, or args of another tool: refused.
    assert not admits(schema, {"name": "schedule_recurring", "arguments": {
        "executor": "send_message", "args": {"to": "me", "text": "x", "cron": "0 8 * * *"}, "cron": "0 8 * * *"}})
    assert not admits(schema, {**good, "arguments": {**good["arguments"], "executor": "me@example.org"}})
    assert not admits(schema, {**good, "arguments": {**good["arguments"], "args": {"paths": ["~/a"]}}})


def test_a_scheduling_tool_offered_alone_names_an_executor_of_the_catalogue() -> None:
    from metnos.runtime.step.catalogue import builtin_tools
    schedule = builtin_tools()["schedule_recurring"].tool
    alone = call_schema([schedule], schedulable=[SEND])
    assert admits(alone, {"name": "schedule_recurring", "arguments": {"executor": "send_message", "cron": "0 9 * * 1",
                                                                       "args": {"to": "me", "text": "water the plants"}}})
    assert not admits(alone, {"name": "schedule_recurring", "arguments": {"executor": "telegram", "cron": "0 9 * * 1", "args": {}}})


def test_the_dialog_tools_are_offered_with_their_own_arguments() -> None:
    """get_inputs takes its question (required, no step reference inside); request_location_from_user may take none."""
    from metnos.runtime.step.catalogue import builtin_tools

    tools = builtin_tools()
    schema = planner_constraint([tools["get_inputs"].tool, tools["request_location_from_user"].tool, READ], OBSERVATIONS,
                                words_only=False).call_schema
    assert admits(schema, {"name": "get_inputs", "arguments": {"question": "Which files should I delete?"}})
    assert admits(schema, {"name": "request_location_from_user", "arguments": {}})
    assert not admits(schema, {"name": "get_inputs", "arguments": {}})
    assert not admits(schema, {"name": "get_inputs", "arguments": {"question": "Which of {{step9.entries}}?"}})
    assert not admits(schema, {"name": "request_location_from_user", "arguments": {"where": "here"}})


def test_an_executors_pattern_holds_in_the_grammar_and_holds_the_whole_value() -> None:
    from metnos.runtime.step.catalogue import compact_schema
    stamp = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}"}}}
    tool = ToolSpec("find_orders", "Orders by code.", compact_schema(stamp), grammar_parameters=compact_schema(stamp, bounds=True))
    schema = call_schema([tool])
    assert admits(schema, {"name": "find_orders", "arguments": {"code": "ABC-12"}})
    # The executor's own search would take a code with words after it; the grammar holds the form alone.
    assert not admits(schema, {"name": "find_orders", "arguments": {"code": "ABC-12 or so"}})
    assert not admits(schema, {"name": "find_orders", "arguments": {"code": "yesterday"}})
    # The prompt's copy of the schema stays without it (it costs tokens and tells a small model little).
    assert "pattern" not in tool.parameters["properties"]["code"]


@pytest.mark.parametrize("written, held", [("^\\d{4}$", "^(?:\\d{4})$"), ("a|b", "^(?:a|b)$"), ("cost\\$", "^(?:cost\\$)$"),
                                           ("^x\\\\$", "^(?:x\\\\)$")])
def test_a_pattern_is_held_whole_and_an_escaped_dollar_stays(written: str, held: str) -> None:
    from metnos.runtime.turn.call_schema import whole_match
    assert whole_match(written) == held


def test_a_pattern_no_grammar_can_hold_is_left_to_the_executor() -> None:
    guarded = {"type": "object", "properties": {"word": {"type": "string", "pattern": "^(?!tmp)\\w+$"}}}
    schema = call_schema([ToolSpec("tag", "Tag.", guarded)])
    assert "(?!" not in str(schema)
    assert admits(schema, {"name": "tag", "arguments": {"word": "tmpfile"}})


def _seed_tools() -> list[ToolSpec]:
    """Every seed executor offered as the runtime offers it (catalogue._tool's schemas), from its signed schema.json."""
    import json
    from pathlib import Path

    from metnos.mechanisms.executors.schemas import check_contract_schemas
    from metnos.runtime.step.catalogue import compact_schema, offered_arguments, tool_parameters

    tools = []
    for folder in sorted((Path(__file__).resolve().parents[2] / "executors").iterdir()):
        schema_file = folder / "schema.json"
        if not schema_file.is_file():
            continue
        schemas = check_contract_schemas(schema_file.read_bytes(), "schema.json#/definitions/Input", "schema.json#/definitions/Output")
        offered = offered_arguments(tool_parameters(schemas.input, step_refs=False), {})
        tools.append(ToolSpec(folder.name, "", compact_schema(offered), grammar_parameters=compact_schema(offered, bounds=True)))
    assert len(tools) >= 20, [t.name for t in tools]
    return tools


def _strings(schema: object, key: str | None = None, at: str = ""):
    """(where, name, schema) of each string argument, in arrays and objects."""
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string":
        yield at, key, schema
    if isinstance(schema.get("items"), dict):
        yield from _strings(schema["items"], key, at + "[]")
    for name, sub in (schema.get("properties") or {}).items():
        yield from _strings(sub, name, f"{at}/{name}")


def test_the_grammar_admits_no_value_a_seed_executors_own_pattern_refuses() -> None:
    """The grammar holds a path argument to the path form, but never over the executor's own pattern
    or over opaque data: a mail folder held to "~/..." was a value read_messages refuses, every time."""
    import re

    from metnos.runtime.turn.call_schema import PATH_PATTERN, whole_match

    tools = _seed_tools()
    schema = call_schema(tools)
    assert "x-opaque" not in str(schema)  # the mark is read, never sent
    by_name = {branch["properties"]["name"]["const"]: branch["properties"]["arguments"] for branch in schema["anyOf"]}
    checked = 0
    for tool in tools:
        held = dict((at, s) for at, _, s in _strings(by_name[tool.name]))
        for at, _, own in _strings(tool.grammar_parameters):
            if isinstance(own.get("pattern"), str):
                checked += 1
                assert held[at].get("pattern") == whole_match(own["pattern"]), (tool.name, at)
            if own.get("x-opaque") is True:
                assert held[at].get("pattern") != PATH_PATTERN, (tool.name, at)
    assert checked >= 1
    folder = by_name["read_messages"]["properties"]["folder"]
    assert re.fullmatch(folder["pattern"][1:-1], "INBOX")
    assert not re.fullmatch(folder["pattern"][1:-1], "~/Documents/courier")
    assert admits(schema, {"name": "read_messages", "arguments": {"folder": "Couriers"}})
    assert not admits(schema, {"name": "read_messages", "arguments": {"folder": "~/Documents/courier"}})
    # A path argument still takes the path form.
    assert not admits(schema, {"name": "read_files", "arguments": {"paths": ["notes/*.md"]}})
    assert admits(schema, {"name": "read_files", "arguments": {"paths": ["~/notes/a.md"]}})


def test_a_schedule_s_expiry_is_held_to_an_instant_the_scheduler_reads() -> None:
    """The 1.5B wrote "expiry": "never" under the grammar and the scheduler refused the schedule
    ('never' is not an ISO 8601 timestamp): the grammar admits only what domain/due.py:parse takes, or null."""
    from domain.due import parse
    from metnos.runtime.step.catalogue import builtin_tools
    schema = call_schema([builtin_tools()["schedule_recurring"].tool])
    base = {"executor": "get_now", "args": {}, "cron": "0 9 * * 1"}
    for expiry in ("never", "2027-01-01", "2027-01-01T09:00:00", "", "tomorrow"):
        assert not admits(schema, {"name": "schedule_recurring", "arguments": {**base, "expiry": expiry}}), expiry
    for expiry in ("2027-01-01T09:00:00Z", "2027-01-01 09:00+01:00", "2027-01-01T09:00:00.5-05:00"):
        assert admits(schema, {"name": "schedule_recurring", "arguments": {**base, "expiry": expiry}}), expiry
        parse(expiry)
    assert admits(schema, {"name": "schedule_recurring", "arguments": {**base, "expiry": None}})


def test_a_position_of_extract_lines_is_one_form_of_three() -> None:
    """The 0.5B wrote two positions in one call ("the final 3 lines": ``first`` and ``last``), the executor refused
    it twice and the README's own rewording ended failed: the schema says exactly one position, and the
    grammar offers the first N, the last N and a range apart."""
    import jsonschema

    [lines] = [t for t in _seed_tools() if t.name == "extract_lines"]
    schema = call_schema([lines])
    assert len(schema["anyOf"]) == 3

    def call(**arguments: object) -> dict:
        return {"name": "extract_lines", "arguments": {"content": "a\nb\nc", **arguments}}

    assert admits(schema, call(last=3)) and admits(schema, call(first=1)) and admits(schema, call(start=2, end=3))
    for two in ({"first": 3, "last": 3}, {"last": 3, "end": 5}, {"first": 1, "start": 2, "end": 3}, {}):
        assert not admits(schema, call(**two)), two
    # The signed schema says the same to every caller: a plan's step or a schedule's is validated against it.
    from pathlib import Path

    from metnos.mechanisms.executors.schemas import check_contract_schemas

    signed = Path(__file__).resolve().parents[2] / "executors" / "extract_lines" / "schema.json"
    full = check_contract_schemas(signed.read_bytes(), "schema.json#/definitions/Input", "schema.json#/definitions/Output").input
    jsonschema.validate({"content": "a", "last": 2}, full)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"content": "a", "first": 2, "last": 2}, full)


def test_no_grammar_holds_a_oneof_not_even_in_a_schedules_args() -> None:
    """A schedule's args are held to the executor it names: extract_lines' three forms are three branches there
    too (its ``oneOf`` under schedule_recurring failed the 1.5B's schedules)."""
    from metnos.runtime.step.catalogue import builtin_tools

    schedule = builtin_tools()["schedule_recurring"].tool
    seeds = _seed_tools()
    schema = call_schema([schedule, *seeds], schedulable=seeds)
    assert '"oneOf"' not in json.dumps(schema)
    [lines] = [t for t in seeds if t.name == "extract_lines"]
    scheduled = call_schema([schedule], schedulable=[lines])
    every_monday = {"name": "schedule_recurring", "arguments": {"executor": "extract_lines", "cron": "0 9 * * 1",
                                                               "args": {"content": "a\nb", "last": 1}}}
    assert admits(scheduled, every_monday)
    every_monday["arguments"]["args"]["first"] = 1
    assert not admits(scheduled, every_monday)
