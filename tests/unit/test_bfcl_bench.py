"""bench/bfcl.py's pure parts: the sample, the tools as Metnos offers them, the widened grammar, and the glue to BFCL's checker.

No model: the replies are written here, and scored by bfcl-eval's own checker
on bfcl-eval's own cases (the parts that need bfcl-eval skip, saying so, where
it is not installed: ./install.sh --test and --bench install it).
"""

from __future__ import annotations

import pytest

from bench.bfcl import (
    CATEGORIES,
    Output,
    SeveralCalls,
    interleave,
    metnos_output,
    plain_output,
    plain_text_output,
    sample,
    several_calls,
    summarize,
    table_lines,
    text_calls,
)
from metnos.mechanisms.llm.messages import ToolCall, ToolSpec
from metnos.runtime.turn.call_schema import planner_constraint

CASES = [{"id": f"simple_python_{i}"} for i in range(40)]


def test_the_sample_is_the_same_for_the_same_seed_and_another_for_another():
    first = [c["id"] for c in sample(CASES, 5, 32, "simple")]
    assert first == [c["id"] for c in sample(list(reversed(CASES)), 5, 32, "simple")]
    assert len(set(first)) == 5
    assert first != [c["id"] for c in sample(CASES, 5, 33, "simple")]
    # Each category draws on its own: adding a category to a run leaves the others' sample as it was.
    assert first != [c["id"] for c in sample(CASES, 5, 32, "multiple")]


def test_all_cases_when_the_sample_is_not_smaller():
    assert [c["id"] for c in sample(CASES, None, 1, "simple")] == sorted(c["id"] for c in CASES)
    assert len(sample(CASES, 400, 1, "simple")) == 40


def test_the_categories_take_turns():
    assert interleave([["s1", "s2", "s3"], ["m1"], ["p1", "p2"]]) == ["s1", "m1", "p1", "s2", "p2", "s3"]
    assert interleave([]) == []


def _tool() -> ToolSpec:
    return ToolSpec(name="math_hypot", description="hypotenuse", parameters={
        "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"]})


def test_the_widened_grammar_admits_several_calls_and_keeps_the_answer():
    constraint = several_calls(planner_constraint([_tool()], {}, words_only=False))
    grammar = constraint.grammar()
    assert 'start: calls | answer\ncalls: call ("\\n" call)*' in grammar
    assert "answer: ANSWER" in grammar
    # Asked for words only, there is nothing to widen.
    assert SeveralCalls(None).grammar() == planner_constraint([_tool()], {}, words_only=True).grammar()


def test_several_calls_are_read_each_by_the_runtime_validation():
    constraint = several_calls(planner_constraint([_tool()], {}, words_only=False))
    text = ('```json\n{"name": "math_hypot", "arguments": {"x": 3, "y": 4}}\n```\n'
            '```json\n{"name": "math_hypot", "arguments": {"x": "three", "y": 4}}\n```')
    first, second = constraint.read_calls(text, call_id="c", cut_off=False)
    assert (first.name, first.arguments, first.arguments_error) == ("math_hypot", {"x": 3, "y": 4}, None)
    assert "is not of type 'integer'" in (second.arguments_error or "")
    assert constraint.read_calls("The answer is 5.", call_id="c", cut_off=False) == ()


def test_a_call_metnos_refuses_is_not_decoded_and_no_call_is_none():
    good = ToolCall(id="a", name="math_hypot", arguments={"x": 3, "y": 4})
    refused = ToolCall(id="b", name="math_hypot", arguments={}, arguments_error="off schema")
    assert metnos_output([good], "").calls == [{"math_hypot": {"x": 3, "y": 4}}]
    assert metnos_output([good, refused], "").calls is None
    assert "off schema" in (metnos_output([good, refused], "").error or "")
    assert metnos_output([], "words").calls is None


def test_a_call_the_runtimes_made_up_values_rule_intercepts_is_no_call_of_metnos_layer():
    hypot = ToolCall(id="a", name="math_hypot", arguments={"x": 3, "y": 4})
    tools = [_tool()]
    made_up = metnos_output([hypot], "", tools=tools, known="What is the tallest mountain?")
    assert made_up.calls is None and made_up.intercepted == ["math_hypot(x, y)"] and "intercepted as made up" in (made_up.error or "")
    asked = metnos_output([hypot], "", tools=tools, known="The sides are 3 and 4: the hypotenuse?")
    assert asked.calls == [{"math_hypot": {"x": 3, "y": 4}}] and asked.intercepted == []
    # Of several calls, the made-up one is not run and the other is.
    other = ToolCall(id="b", name="math_hypot", arguments={"x": 8, "y": 9})
    both = metnos_output([hypot, other], "", tools=tools, known="The sides are 3 and 4: the hypotenuse?")
    assert both.calls == [{"math_hypot": {"x": 3, "y": 4}}] and both.intercepted == ["math_hypot(x, y)"]
    # Without the request, as the runtime without the rule: the call is the layer's.
    assert metnos_output([hypot], "").calls == [{"math_hypot": {"x": 3, "y": 4}}]


def test_the_calls_metnos_runs_lose_the_optional_values_its_unasked_options_rule_leaves_out():
    circle = ToolSpec(name="geometry_circumference", description="circumference", parameters={
        "type": "object", "properties": {"radius": {"type": "integer"}, "units": {"type": "string"}}, "required": ["radius"]})
    call = ToolCall(id="a", name="geometry_circumference", arguments={"radius": 3, "units": "m"})
    left = metnos_output([call], "", tools=[circle], known="Calculate the circumference of a circle with radius 3")
    assert left.calls == [{"geometry_circumference": {"radius": 3}}] and left.unasked == ["geometry_circumference(units)"]
    kept = metnos_output([call], "", tools=[circle], known="the circumference of a circle of radius 3 m")
    assert kept.calls == [{"geometry_circumference": {"radius": 3, "units": "m"}}] and kept.unasked == []
    # Without the request, as the runtime without the rules: the call as the model wrote it.
    assert metnos_output([call], "").calls == [{"geometry_circumference": {"radius": 3, "units": "m"}}]


def test_plain_calls_come_from_tool_calls_only():
    def raw(message):
        return {"choices": [{"message": message}]}

    call = {"type": "function", "function": {"name": "math_hypot", "arguments": '{"x": 3, "y": 4}'}}
    assert plain_output(raw({"content": None, "tool_calls": [call, call]})).calls == [{"math_hypot": {"x": 3, "y": 4}}] * 2
    written = '```json\n{"name": "math_hypot", "arguments": {"x": 3, "y": 4}}\n```'
    assert plain_output(raw({"content": written})).calls is None
    broken = {"type": "function", "function": {"name": "math_hypot", "arguments": '{"x": 3,'}}
    assert "not decodable" in (plain_output(raw({"tool_calls": [broken]})).error or "")


def test_calls_are_read_from_the_text_in_each_form_a_plain_reply_writes_them():
    hypot = {"math_hypot": {"x": 3, "y": 4}}
    # Fenced, as the coder models write them under the GGUF's own template.
    assert text_calls('```json\n{"name": "math_hypot", "arguments": {"x": 3, "y": 4}}\n```') == [hypot]
    assert text_calls('Sure:\n```\n{"name": "math_hypot", "arguments": {"x": 3, "y": 4}}\n```\nDone.') == [hypot]
    # In <tool_call> tags (the template's own form), one block a call.
    tagged = ('<tool_call>\n{"name": "math_hypot", "arguments": {"x": 3, "y": 4}}\n</tool_call>\n'
              '<tool_call>\n{"name": "math_hypot", "arguments": {"x": 5, "y": 12}}\n</tool_call>')
    assert text_calls(tagged) == [hypot, {"math_hypot": {"x": 5, "y": 12}}]
    # Bare, in words, with "parameters" and arguments as a JSON string.
    assert text_calls('I will call {"name": "math_hypot", "parameters": {"x": 3, "y": 4}} now.') == [hypot]
    assert text_calls('{"name": "math_hypot", "arguments": "{\\"x\\": 3, \\"y\\": 4}"}') == [hypot]
    # A list of calls in one block, and several blocks.
    assert text_calls('```json\n[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"k": 1}}]\n```') == [{"a": {}}, {"b": {"k": 1}}]
    assert text_calls('```json\n{"name": "a", "arguments": {}}\n```\n```json\n{"name": "b", "arguments": {}}\n```') == [{"a": {}}, {"b": {}}]
    # Wrong arguments are still a call (the checker judges them; for irrelevance it is a call).
    assert text_calls('```json\n{"name": "math_hypot", "arguments": {"x": "three"}}\n```') == [{"math_hypot": {"x": "three"}}]


def test_words_and_json_that_is_no_call_read_as_no_call():
    assert text_calls("The hypotenuse is 5.") is None
    assert text_calls("") is None
    assert text_calls('```json\n{"result": 5}\n```') is None
    assert text_calls('{"name": "math_hypot"}') is None
    assert text_calls('{"arguments": {"x": 3, "y": 4}}') is None
    assert text_calls('{"name": 7, "arguments": {"x": 3}}') is None
    assert text_calls('{"name": "math_hypot", "arguments": [3, 4]}') is None
    assert text_calls('```json\n{"name": "math_hypot", "arguments": {"x": 3,\n```') is None


def test_the_text_read_column_keeps_parsed_tool_calls_and_reads_the_text_only_without_them():
    parsed = Output([{"math_hypot": {"x": 3, "y": 4}}], None, '```json\n{"name": "other", "arguments": {}}\n```')
    assert plain_text_output(parsed) is parsed
    written = Output(None, "no tool_calls", '```json\n{"name": "math_hypot", "arguments": {"x": 3, "y": 4}}\n```')
    assert plain_text_output(written).calls == [{"math_hypot": {"x": 3, "y": 4}}]
    words = plain_text_output(Output(None, "no tool_calls", "No tool fits."))
    assert words.calls is None and "no call in the text" in (words.error or "")


def test_the_table_shows_all_three_columns():
    from bench.bfcl import CaseRun

    runs = [CaseRun("simple", "s1", "metnos", True, "", 1.0, 1), CaseRun("simple", "s1", "plain", False, "", 1.0, 0),
            CaseRun("simple", "s1", "plain_text", True, "", 1.0, 1), CaseRun("simple", "s2", "metnos", True, "", 1.0, 1),
            CaseRun("simple", "s2", "plain", False, "", 1.0, 0), CaseRun("simple", "s2", "plain_text", False, "", 1.0, 0)]
    head, _, row = table_lines({"summary": summarize(runs)})
    assert "Metnos's layer | plain (tool_calls only) | plain (+ calls read from text) | ratio to text-read" in head
    assert row.startswith("| simple | 2 | 100.0% (2/2) | 0.0% (0/2) | 50.0% (1/2) | 2.00 |")


# With bfcl-eval: its cases, its conversion and its checker.

@pytest.fixture(scope="module")
def bfcl():
    pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (./install.sh --test installs it)")
    from bench.bfcl import load_bfcl

    return load_bfcl()


def _case(bfcl, category: str, case_id: str):
    name = CATEGORIES[category]
    case = next(c for c in bfcl.load_cases(name) if c["id"] == case_id)
    answer = None if category == "irrelevance" else next(a for a in bfcl.load_answers(name) if a["id"] == case_id)
    return case, answer


def test_a_bfcl_function_becomes_a_tool_metnos_offers_and_its_grammar_holds_to(bfcl):
    from bench.bfcl import offered_tools

    case, _ = _case(bfcl, "simple", "simple_python_2")  # math.hypot(x: integer, y: integer, z?: integer), type "dict"
    (spec,), (openai_tool,) = offered_tools(bfcl, case["function"])
    assert spec.name == "math_hypot" == openai_tool["function"]["name"]
    assert spec.parameters["type"] == "object" and spec.parameters["required"] == ["x", "y"]
    assert case["function"][0]["parameters"]["type"] == "dict", "the case itself is left as BFCL wrote it"
    constraint = planner_constraint([spec], {}, words_only=False)
    ok = constraint.read_reply('```json\n{"name": "math_hypot", "arguments": {"x": 4, "y": 5}}\n```', call_id="c", cut_off=False)
    assert ok is not None and ok.arguments_error is None
    off = constraint.read_reply('```json\n{"name": "math_hypot", "arguments": {"x": 4, "w": 5}}\n```', call_id="c", cut_off=False)
    assert off is not None and off.arguments_error


def test_floats_become_numbers(bfcl):
    from bench.bfcl import offered_tools

    floats = [c for c in bfcl.load_cases("simple_python") if any(p.get("type") == "float" for p in c["function"][0]["parameters"]["properties"].values())]
    (spec,), _ = offered_tools(bfcl, floats[0]["function"])
    types = {p["type"] for p in spec.parameters["properties"].values()}
    assert "float" not in types and "number" in types


def test_bfcl_checker_scores_a_simple_case(bfcl):
    from bench.bfcl import score

    case, answer = _case(bfcl, "simple", "simple_python_1")  # math.factorial(number=5)
    assert score(bfcl, "simple", case, answer, Output([{"math_factorial": {"number": 5}}])) == (True, "")
    passed, why = score(bfcl, "simple", case, answer, Output([{"math_factorial": {"number": 6}}]))
    assert not passed and "Expected one of [5]" in why
    assert not score(bfcl, "simple", case, answer, Output(None, "no call"))[0]
    # A call named as BFCL names it (a dot) is not what an OpenAI-style tool is called.
    assert not score(bfcl, "simple", case, answer, Output([{"math.factorial": {"number": 5}}]))[0]


def test_bfcl_checker_scores_parallel_calls_in_any_order_and_counts_them(bfcl):
    from bench.bfcl import score

    case, answer = _case(bfcl, "parallel", "parallel_0")
    calls = [{name.replace(".", "_"): {k: v[0] for k, v in args.items() if v and v[0] != ""}} for call in answer["ground_truth"]
             for name, args in call.items()]
    assert len(calls) > 1
    assert score(bfcl, "parallel", case, answer, Output(list(reversed(calls))))[0]
    assert not score(bfcl, "parallel", case, answer, Output(calls[:1]))[0]


def test_irrelevance_is_right_only_without_a_call(bfcl):
    from bench.bfcl import score

    case, _ = _case(bfcl, "irrelevance", "irrelevance_0")
    name = case["function"][0]["name"].replace(".", "_")
    assert score(bfcl, "irrelevance", case, None, Output(None, "no call", "I cannot do that with these tools."))[0]
    assert score(bfcl, "irrelevance", case, None, Output([{}]))[0], "BFCL reads [{}] as no call"
    assert not score(bfcl, "irrelevance", case, None, Output([{name: {}}]))[0]


def test_the_text_read_column_is_scored_by_the_same_checker_and_irrelevance_rule(bfcl):
    from bench.bfcl import score

    case, answer = _case(bfcl, "simple", "simple_python_1")  # math.factorial(number=5)
    fenced = Output(None, "no tool_calls", '```json\n{"name": "math_factorial", "arguments": {"number": 5}}\n```')
    assert not score(bfcl, "simple", case, answer, fenced)[0], "tool_calls only: the text is not read"
    assert score(bfcl, "simple", case, answer, plain_text_output(fenced)) == (True, "")
    wrong = Output(None, "no tool_calls", '```json\n{"name": "math_factorial", "arguments": {"number": 6}}\n```')
    assert not score(bfcl, "simple", case, answer, plain_text_output(wrong))[0]
    irrelevant, _ = _case(bfcl, "irrelevance", "irrelevance_0")
    name = irrelevant["function"][0]["name"].replace(".", "_")
    called = Output(None, "no tool_calls", f'```json\n{{"name": "{name}", "arguments": {{}}}}\n```')
    assert score(bfcl, "irrelevance", irrelevant, None, called)[0], "tool_calls only: never a call"
    assert not score(bfcl, "irrelevance", irrelevant, None, plain_text_output(called))[0]
    assert score(bfcl, "irrelevance", irrelevant, None, plain_text_output(Output(None, "no tool_calls", "I cannot.")))[0]


def test_an_intercepted_call_is_right_on_irrelevance_and_a_miss_elsewhere(bfcl):
    from bench.bfcl import offered_tools, request_text, score

    case, answer = _case(bfcl, "simple", "simple_python_1")  # math.factorial(number=5)
    specs, _ = offered_tools(bfcl, case["function"])
    right = ToolCall(id="a", name="math_factorial", arguments={"number": 5})
    assert score(bfcl, "simple", case, answer, metnos_output([right], "", tools=specs, known=request_text(case))) == (True, "")
    made_up = metnos_output([right], "", tools=specs, known="What is the tallest mountain?")
    assert not score(bfcl, "simple", case, answer, made_up)[0]
    irrelevant, _ = _case(bfcl, "irrelevance", "irrelevance_0")
    specs, _ = offered_tools(bfcl, irrelevant["function"])
    spec = specs[0]
    invented = {k: 987654 if v.get("type") in ("integer", "number") else "zzqx" for k, v in spec.parameters["properties"].items()}
    call = ToolCall(id="a", name=spec.name, arguments=invented)
    assert not score(bfcl, "irrelevance", irrelevant, None, metnos_output([call], ""))[0]
    assert score(bfcl, "irrelevance", irrelevant, None, metnos_output([call], "", tools=specs, known=request_text(irrelevant)))[0]
