"""The cascade's pure pieces: requests, slots, templates, plans, the vector index, the embedder."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from metnos.runtime.cascade.consult import stale_reason, template_score
from metnos.runtime.cascade.embedding import HashedNgramEmbedder, VectorIndex, WordLlamaEmbedder
from domain.cascade.plan import bind, generalise, holes_used, plan_id
from domain.cascade.request import differing_words, intent_of, normalise, request_key
from domain.cascade.template import TemplateGap, derived_digits, make_template, render


def test_case_spacing_and_closing_punctuation_make_the_same_request() -> None:
    assert request_key("What time is it?") == request_key("  what  time is it ") != request_key("what time was it")
    assert normalise("Read ~/A.txt!") == "read ~/a.txt"


@pytest.mark.parametrize(("text", "intent", "values"), [
    ("count the lines of ~/notes/a.txt", "count the lines of <path>", ["~/notes/a.txt"]),
    ("fetch http://127.0.0.1:8000/x.html and tell me its title", "fetch <url> and tell me its title", ["http://127.0.0.1:8000/x.html"]),
    ('send "hello there" to Alice', "send <quoted> to <name>", ["hello there", "Alice"]),
    ("what happened on 2026-11-02, and 3 more", "what happened on <date>, and <number> more", ["2026-11-02", "3"]),
    ("the sum of report.csv", "the sum of <path>", ["report.csv"]),
])
def test_slots_are_found_by_rules(text: str, intent: str, values: list[str]) -> None:
    found, slots = intent_of(text)
    assert found == intent and [s.value for s in slots] == values


@pytest.mark.parametrize(("a", "b", "differ"), [
    ("Read ~/j/march.txt and tell me the last two lines.", "Please show me the last two lines of ~/j/march.txt.", set()),
    ("How many eggs does the recipe need?", "How many eggs are needed by the recipe?", set()),
    ("What is today's date?", "What's the date today?", set()),
    ("What is the first item on my list?", "What is the last item on my list?", {"first", "last"}),
    ("read my todo list", "delete my todo list", {"delete"}),
    ("how many .jpg photos", "how many .png photos", {"jpg", "png"}),
])
def test_a_rewording_may_only_change_words_that_ask_nothing(a: str, b: str, differ: set[str]) -> None:
    assert differing_words(a, b) == differ


def test_an_answer_template_slots_quoted_outputs_and_renders_new_ones() -> None:
    outputs = {1: {"ok": True, "entries": [{"path": "/h/a.txt", "content": "buy milk", "size": 8}]}}
    segments = make_template("Your list says: buy milk (8 bytes)", outputs)
    assert segments == [{"text": "Your list says: "}, {"ref": [1, "entries", 0, "content"]}, {"text": " ("},
                        {"ref": [1, "entries", 0, "size"]}, {"text": " bytes)"}]
    assert render(segments, {1: {"entries": [{"content": "buy bread", "size": 9}]}}) == "Your list says: buy bread (9 bytes)"
    with pytest.raises(TemplateGap, match="entries.0.content"):
        render(segments, {1: {"entries": []}})


def test_a_number_is_slotted_only_where_it_stands_alone() -> None:
    segments = make_template("2 files in 2024", {1: {"count": 2}})
    assert segments == [{"ref": [1, "count"]}, {"text": " files in 2024"}]
    assert derived_digits(segments, "how many files") == ["2024"]
    assert derived_digits(segments, "how many files in 2024") == []


def test_a_number_two_outputs_share_renders_only_where_they_still_agree() -> None:
    # An empty file: its size and its line count are both 0, and the answer "It has 0 lines." meant one of them.
    learnt = {1: {"entries": [{"content": "", "size": 0, "lines": 0}]}}
    segments = make_template("It has 0 lines.", learnt)
    assert segments == [{"text": "It has "}, {"ref": [1, "entries", 0, "size"], "or": [[1, "entries", 0, "lines"]]},
                        {"text": " lines."}]
    assert render(segments, {1: {"entries": [{"content": "a\nb\n", "size": 2, "lines": 2}]}}) == "It has 2 lines."
    with pytest.raises(TemplateGap, match=r"size or step 1's entries.0.lines.*now 4 and 1"):
        render(segments, {1: {"entries": [{"content": "  \r\n", "size": 4, "lines": 1}]}})


def test_a_template_binds_new_slot_values_into_arguments_and_answer() -> None:
    plan = {"steps": [{"executor": "read_files", "version": "1.0.0", "args": {"paths": ["~/a.txt"], "max_lines": 3}}],
            "answer": [{"text": "~/a.txt starts: "}, {"ref": [1, "entries", 0, "content"]}]}
    _, slots = intent_of("show 3 lines of ~/a.txt")
    template = generalise(plan, slots)
    assert template["steps"][0]["args"] == {"paths": ["⟦1⟧"], "max_lines": {"$slot": 0}} and holes_used(template)
    bound = bind(template, ["5", "~/b.txt"])
    assert bound["steps"][0]["args"] == {"paths": ["~/b.txt"], "max_lines": 5}
    assert bound["answer"][0] == {"text": "~/b.txt starts: "}
    assert plan_id(bind(template, ["3", "~/a.txt"])) == plan_id(plan)


def test_a_plan_is_stale_when_an_executor_moved_on() -> None:
    plan = {"steps": [{"executor": "find_files", "version": "1.0.0", "args": {}}], "answer": []}
    assert stale_reason(plan, {"find_files": {"version": "1.0.0"}}) is None
    assert stale_reason(plan, {"find_files": {"version": "1.1.0"}}) == "find_files is at version 1.1.0, the plan ran 1.0.0"
    assert stale_reason(plan, {}) == "find_files is no longer active"


def test_the_champion_is_the_template_with_the_better_record() -> None:
    steady = {"sources": ["a", "b", "c"], "wins": 4, "losses": 0}
    shaky = {"sources": ["d", "e"], "wins": 5, "losses": 4}
    assert template_score(steady) > template_score(shaky)


def test_the_coarse_index_finds_what_the_exact_product_finds() -> None:
    embedder = WordLlamaEmbedder()
    verbs = ["read", "list", "find", "count", "sort", "describe", "fetch", "show", "sum", "filter"]
    things = ["notes", "reports", "photos", "logs", "invoices", "songs", "letters", "recipes", "tickets", "drafts"]
    texts = [f"{verbs[i % 10]} the {things[(i // 10) % 10]} of week {i // 100} in folder {i % 97}" for i in range(25_000)]
    vectors = embedder.embed(texts)
    index = VectorIndex([str(i) for i in range(len(texts))], vectors, embedder.prefix_dims)
    assert index.coarse is not None
    assert VectorIndex(["a"] * 25_000, HashedNgramEmbedder().embed(texts[:1]).repeat(25_000, 0)).coarse is None
    for probe in (5, 777, 24_999):
        query = embedder.embed([texts[probe] + " please"])[0]
        scores = vectors @ query
        found, similarity = index.nearest(query, k=1)[0]
        assert similarity == pytest.approx(float(scores.max()), abs=1e-5)


def test_the_packaged_model_loads_with_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kw: object) -> None:
        raise AssertionError("the embedder tried the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    embedder = WordLlamaEmbedder()
    a, b, c = embedder.embed(["what time is it", "what's the time now", "delete the old logs"])
    assert a @ b > 0.7 > a @ c


def _consultant(state: dict, problems: dict[str, list[str]]):  # noqa: ANN202
    from metnos.runtime.cascade.consult import CascadeSettings, PlanConsultant

    return PlanConsultant(plans=lambda: state, current=lambda: {"read_files": {"version": "1.0.0"}},
                          now=lambda: "2026-06-01T00:00:00+00:00",
                          validate=lambda plan: problems.get(plan["answer"][0]["text"], []),
                          settings=CascadeSettings(), embedder=HashedNgramEmbedder)


def _template(tag: str, walks: int, wins: int, losses: int) -> dict:
    # The answer quotes what the step read: a template that quotes nothing is not proposed.
    plan = {"steps": [{"executor": "read_files", "version": "1.0.0", "args": {"paths": ["⟦0⟧"]}}],
            "answer": [{"text": tag}, {"ref": [1, "content"]}]}
    return {"template": plan, "sources": [f"{tag}{i}" for i in range(walks)], "values": [[f"~/{tag}{i}"] for i in range(walks)],
            "wins": wins, "losses": losses, "last": "2026-05-01T00:00:00+00:00"}


def test_the_champion_is_proposed_and_l2_re_proposes_once() -> None:
    intent = intent_of("show me ~/x.txt")[0]
    state = {"entries": {}, "by_key": {}, "anti": {}, "templates": {intent: {
        "champion": _template("champion", 4, 3, 0), "challenger": _template("challenger", 3, 0, 1), "third": _template("third", 2, 0, 2)}}}
    found = _consultant(state, {}).consult("show me ~/y.txt")
    assert found.layer == "L1" and found.entry == "champion" and found.plan["steps"][0]["args"] == {"paths": ["~/y.txt"]}
    # The validator refuses the champion: the challenger is proposed instead, once.
    found = _consultant(state, {"champion": ["step 1: off schema"]}).consult("show me ~/y.txt")
    assert found.entry == "challenger" and found.rejected == [{"layer": "L1", "entry": "champion", "why": "L2: step 1: off schema"}]
    found = _consultant(state, {"champion": ["bad"], "challenger": ["bad"]}).consult("show me ~/y.txt")
    assert found.layer is None and [r["entry"] for r in found.rejected] == ["champion", "challenger"]
    # An anti-skill is skipped before the validator is asked.
    state["anti"]["champion"] = "2026-06-20T00:00:00+00:00"
    found = _consultant(state, {}).consult("show me ~/y.txt")
    assert found.entry == "challenger" and "anti-skill" in found.rejected[0]["why"]


def test_a_template_walked_with_one_value_only_is_not_proposed() -> None:
    intent = intent_of("show me ~/x.txt")[0]
    same = _template("same", 3, 0, 0)
    same["values"] = [["~/x.txt"]] * 3
    found = _consultant({"entries": {}, "by_key": {}, "anti": {}, "templates": {intent: {"same": same}}}, {}).consult("show me ~/y.txt")
    assert found.layer is None and found.reason == "unknown request"


def test_a_date_in_an_outputs_metadata_is_a_slot() -> None:
    output = {"ok": True, "content": "2026-11-24T20:47:00+00:00", "metadata": {"date": "2026-11-24", "weekday": "Tuesday"}}
    segments = make_template("Today is Tuesday, 2026-11-24.", {1: output})
    assert render(segments, {1: {"content": "x", "metadata": {"date": "2026-11-25", "weekday": "Wednesday"}}}) == "Today is Wednesday, 2026-11-25."
    assert derived_digits(segments, "what is the date") == []


def test_loading_the_embedder_leaves_the_root_logger_as_it_was() -> None:
    import logging
    import subprocess
    import sys

    # A fresh interpreter: wordllama configures the root logger only on its first import.
    code = ("import logging; from metnos.runtime.cascade.embedding import WordLlamaEmbedder; WordLlamaEmbedder(); "
            "r = logging.getLogger(); print(r.level, len(r.handlers))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(logging.WARNING), "0"], out


def test_steps_that_never_ran_are_left_out_and_later_references_follow() -> None:
    from domain.cascade.plan import steps_that_ran

    def step(executor: str, **args: object) -> dict:
        return {"executor": executor, "args": args, "version": "1.0.0", "output": {"ok": True}}

    steps = {1: step("read_files", paths=["~/a"]), 2: step("read_files", paths=["~/a"]),
             3: step("filter_entries", from_step=1, field="x"), 4: step("write_files", content="{{step3.entries.0.x}}", paths=["~/step2.txt"])}
    kept = steps_that_ran(steps, {2})
    assert [s["executor"] for s in kept] == ["read_files", "filter_entries", "write_files"]
    assert kept[1]["args"]["from_step"] == 1 and kept[2]["args"]["content"] == "{{step2.entries.0.x}}"
    # Only references are numbered again: a path that looks like one is left as it is.
    assert kept[2]["args"]["paths"] == ["~/step2.txt"]
    # A step that ran but refers to one that did not: the turn cannot be followed again.
    steps[3] = step("filter_entries", from_step=2, field="x")
    assert steps_that_ran(steps, {2}) is None
    assert steps_that_ran(steps, set()) == [steps[1], steps[2], steps[3], steps[4]]


def test_a_templates_holes_are_not_numbers_the_model_worked_out() -> None:
    assert derived_digits([{"text": "⟦0⟧ says "}, {"ref": [1, "content"]}], "read ~/notes/x.txt") == []
    assert derived_digits([{"text": "⟦0⟧ has 7 lines"}], "read ~/notes/x.txt") == ["7"]


def test_a_template_the_user_approved_a_walk_of_is_proposed_after_that_walk_alone() -> None:
    intent = intent_of("show me ~/x.txt")[0]
    once = _template("once", 1, 0, 0)
    state = {"entries": {}, "by_key": {}, "anti": {}, "templates": {intent: {"once": once}}}
    assert _consultant(state, {}).consult("show me ~/y.txt").layer is None
    # The user approved that walk: it needs no second one.
    state["entries"]["e1"] = _entry("once0", "open ~/once0 and more")
    state["entry_of_turn"] = {"once0": "e1"}
    found = _consultant(state, {}).consult("show me ~/y.txt")
    assert found.layer == "L1" and found.entry == "once" and found.plan["steps"][0]["args"] == {"paths": ["~/y.txt"]}
    # Its plan failed since (an anti-skill): the approval no longer speaks for it.
    state["anti"][state["entries"]["e1"]["plan_id"]] = "2026-06-20T00:00:00+00:00"
    assert _consultant(state, {}).consult("show me ~/y.txt").layer is None
    # Nor does a forgotten one.
    state["anti"].clear()
    state["entries"]["e1"]["state"] = "forgotten"
    assert _consultant(state, {}).consult("show me ~/y.txt").layer is None


def _entry(turn_id: str, text: str) -> dict:
    plan = {"steps": [{"executor": "read_files", "version": "1.0.0", "args": {"paths": [text.split()[1]]}}], "answer": [{"text": "x"}]}
    return {"id": turn_id, "turn_id": turn_id, "text": text, "key": request_key(text), "slots": [["path", text.split()[1]]],
            "plan": plan, "plan_id": plan_id(plan), "state": "approved"}


def test_an_approved_chain_is_champion_over_a_better_scored_one_the_log_alone_taught() -> None:
    intent = intent_of("show me ~/x.txt")[0]
    state = {"entries": {"e1": _entry("approved0", "open ~/approved0 and more")}, "entry_of_turn": {"approved0": "e1"}, "by_key": {}, "anti": {},
             "templates": {intent: {"learnt": _template("learnt", 5, 4, 0), "approved": _template("approved", 1, 0, 0)}}}
    assert _consultant(state, {}).consult("show me ~/y.txt").entry == "approved"


def _read(content: str, path: str = "/home/u/notes/d.txt") -> dict:
    return {"ok": True, "entries": [{"path": path, "content": content, "size": len(content.encode()), "truncated": False}],
            "metadata": {"ok_count": 1, "fail_count": 0}, "content": content}


@pytest.mark.parametrize("content", ["dentist at noon\n", "dentist\r\nat noon\r\n", "  dentist at noon \n\n", "caffè e 東京タワー 🙂\n", "2024\n"])
def test_a_value_quoted_without_its_surrounding_whitespace_is_a_slot_trimmed_alike(content: str) -> None:
    quoted = content.replace("\r\n", "\n").strip()
    segments = make_template(f"It says: {quoted}", {1: _read(content)})
    assert segments[0] == {"text": "It says: "} and segments[1]["trim"] is True and len(segments) == 2
    assert render(segments, {1: _read("elephants\r\ndance\n")}) == "It says: elephants\ndance"


def test_a_number_that_also_stands_inside_an_output_text_is_not_slotted() -> None:
    # "1" is read_files' ok_count and the file's first line: the model quoted one of them.
    assert make_template("The first line is 1", {1: _read("1\n2\n3\n")}) == [{"text": "The first line is 1"}]
    # A file whose whole content is the number: the content's slot, trimmed.
    assert make_template("It says 2024", {1: _read("2024\n")})[1]["ref"][-1] == "content"
    assert make_template("It says 7", {1: _read("7\n")}) == [{"text": "It says 7"}]


@pytest.mark.parametrize(("answer", "content", "carried"), [
    ("The first line is: dentist at noon", "dentist at noon\nthen lunch\n", ["dentist", "noon"]),
    ("It says: hi", "hi\n", ["hi"]),
    ("It says: a", "a", ["a"]),
    ("IT SAYS: DENTIST", "dentist\n", ["dentist"]),
    ("It ends with 42.", "the answer is 42\n", ["42"]),
    ("C'è scritto: 東京", "東京タワー\n", ["京", "東"]),
    ("It says 🙂", "happy 🙂 days\n", ["🙂"]),
    ("The file d.txt says: the dentist at noon", "the dentist at noon\n", []),
    ("It is in ~/notes/d.txt, and it says: the dentist at noon", "the dentist at noon\n", []),
])
def test_the_words_an_answer_took_from_the_outputs_are_named(answer: str, content: str, carried: list[str]) -> None:
    from domain.cascade.provenance import carried_words

    output = _read(content)
    assert carried_words(make_template(answer, {1: output}), {1: output}, "read ~/notes/d.txt and tell me what it says") == carried


def test_the_requests_own_words_and_an_answers_frame_are_not_data() -> None:
    from domain.cascade.provenance import carried_words

    output = _read("shopping: milk, eggs\nthe list is long\n")
    # "shopping" and "list" are the request's (outside its slot), "is" and "the" a frame's function words.
    segments = make_template("Your shopping list is the following. shopping: milk, eggs\nthe list is long", {1: output})
    assert carried_words(segments, {1: output}, "show my shopping list in ~/notes/d.txt") == []
    # The same words, the request without them: the answer carries them.
    assert carried_words(segments, {1: output}, "show ~/notes/d.txt") == ["shopping", "list"]


def test_an_argument_copied_from_an_earlier_output_is_carried_data() -> None:
    from domain.cascade.provenance import carried

    found = {"ok": True, "entries": [{"path": "/home/u/notes/plans.md", "name": "plans.md", "size": 12}]}
    read = _read("soon", "/home/u/notes/plans.md")
    copied = {"steps": [{"executor": "find_files", "args": {"base_path": "~/notes"}},
                        {"executor": "read_files", "args": {"paths": ["/home/u/notes/plans.md"]}}],
              "answer": [{"text": "It says: "}, {"ref": [2, "content"]}]}
    assert "step 2" in carried(copied, {1: found, 2: read}, "read the newest file in ~/notes")
    piped = {**copied, "steps": [copied["steps"][0], {"executor": "read_files", "args": {"from_step": 1}}]}
    assert carried(piped, {1: found, 2: read}, "read the newest file in ~/notes") is None
    # A field name of the outputs, or a value the request holds, is the plan's own.
    by_size = {**copied, "steps": [copied["steps"][0], {"executor": "sort_entries", "args": {"from_step": 1, "by": "size"}}]}
    assert carried(by_size, {1: found, 2: {"ok": True, "entries": [{"name": "size"}]}}, "sort ~/notes") is None
    assert carried(copied, {1: found, 2: read}, "read /home/u/notes/plans.md, found in ~/notes") is None


def test_a_path_slots_file_name_is_a_hole_bound_to_the_new_files() -> None:
    plan = {"steps": [{"executor": "read_files", "version": "1.0.0", "args": {"paths": ["~/notes/d.txt"]}}],
            "answer": [{"text": "d.txt says: "}, {"ref": [1, "content"], "trim": True}, {"text": " (not from data.txt)"}]}
    template = generalise(plan, intent_of("read ~/notes/d.txt")[1])
    assert template["answer"][0] == {"text": "⟦0:name⟧ says: "} and template["answer"][2] == {"text": " (not from data.txt)"}
    assert bind(template, ["~/notes/e.md"])["answer"][0] == {"text": "e.md says: "}
    assert derived_digits(template["answer"], "read ~/notes/e.md") == []


@pytest.mark.parametrize("mark", ["\ud7fc", "\u00a7", "\u2014", "\u0301", "\ue000"])
def test_a_lone_character_past_ascii_that_a_step_read_is_carried(mark: str) -> None:
    """Hypothesis found a file holding U+D7FC alone (unassigned: no word, no symbol) whose answer,
    that character, became a template's literal text: the next file's request got it back."""
    from domain.cascade.provenance import carried_words
    outputs = {1: {"ok": True, "entries": [{"path": "/h/a.txt", "content": mark}]}}
    assert carried_words([{"text": mark}], outputs, "read ~/a.txt and tell me what it says") == [mark]
    assert carried_words([{"text": "It says nothing."}], outputs, "read ~/a.txt and tell me what it says") == []
