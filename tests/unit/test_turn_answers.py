"""What reads as an answer and what does not (issue 17, item 2)."""

from __future__ import annotations

import pytest

from metnos.runtime.turn.answers import (
    EMPTY, INSTRUCTIONS_ECHOED, RAW_TOOL_OUTPUT, STUB, TOOL_CALL_AS_TEXT, TOOL_NAME, answer_problem, grounded_in,
    instructions_in,
)
from metnos.runtime.turn.guards import DUPLICATE_READ, REPEATED_ACTION, GuardDecision

TOOLS = frozenset({"read_files", "compute_entries", "get_now"})
OBS = [{"ok": True, "content": "alpha\nbeta", "entries": [{"path": "/h/a.md", "content": "alpha\nbeta"}]}]


@pytest.mark.parametrize(("text", "reason"), [
    ("", EMPTY), ("  \n", EMPTY),
    ("read_files", TOOL_NAME), ("`compute_entries`", TOOL_NAME), ("get_now()", TOOL_NAME), ("read_files.", TOOL_NAME),
    ('{"ok": true, "content": "alpha"}', RAW_TOOL_OUTPUT),
    ('```json\n{"error": {"kind": "Crash"}}\n```', RAW_TOOL_OUTPUT),
    ('[{"path": "/h/a.md", "content": "alpha\\nbeta"}]', RAW_TOOL_OUTPUT),
    ('{"name": "read_files", "arguments": {"paths": ["x"]}}', TOOL_CALL_AS_TEXT),
    ('<tool_call>{"name": "get_now"}</tool_call>', TOOL_CALL_AS_TEXT),
    ("read_files(paths=['~/a.md'])", TOOL_CALL_AS_TEXT),
    ("The tool returned:", STUB), ("Here are the last three lines:", STUB),
    # A lead-in over the result: what the 1.5B answered, copying the prompt's scaffold.
    ('Step 2 returned:\n{"entries":[{"modified":"2026-11-24T23:01:47+00:00","name":"invoice_april.pdf"', RAW_TOOL_OUTPUT),
    ('Here is the result:\n```json\n{"ok": true, "content": "alpha"}\n```', RAW_TOOL_OUTPUT),
    ('The files are:\n[{"path": "/h/a.md", "content": "alpha\\nbeta"}]', RAW_TOOL_OUTPUT),
    # JSON made of a step's values, not the step's own object: what the 1.5B answered for the last lines.
    ('```json\n{"content": "alpha\\nbeta"}\n```', RAW_TOOL_OUTPUT),
    ('{"lines": ["alpha", "beta"]}', RAW_TOOL_OUTPUT),
    # The envelope without its braces, which the planner's grammar forbids at an answer's start: the 0.5B's whole
    # answer to "which town am I in?", with no step taken.
    ("ok false", RAW_TOOL_OUTPUT), ('"ok": true, "content": "alpha"', RAW_TOOL_OUTPUT), ("OK: False", RAW_TOOL_OUTPUT),
    ("Step 1 returned:\nok false", RAW_TOOL_OUTPUT),
])
def test_non_answers_are_named(text: str, reason: str) -> None:
    assert answer_problem(text, TOOLS, OBS) == reason


@pytest.mark.parametrize("text", [
    "alpha and beta", "The total is 7.", "42", "It is 14:03 in Rome.",
    "The file lists: milk, bread and eggs.",  # a colon inside a sentence is fine
    "I used read_files to read it: it says alpha.",
    "files_total is not a tool, and this is an answer",
    "The files are:\n- invoice_april.pdf\n- invoice_may.pdf",  # a lead-in over a list in words is an answer
    "The settings are:\n{retries: 3} is what the file says, so three retries.",
    '{"summary": "gamma"}',  # JSON the steps did not give: an answer, checked for grounding elsewhere
    "OK, true: the file holds alpha.", "Okay, false alarm: nothing changed.", "ok",  # words, not an envelope
])
def test_answers_pass(text: str) -> None:
    assert answer_problem(text, TOOLS, OBS) is None


def test_grounded_answers_share_a_value_not_a_key() -> None:
    assert grounded_in("it says beta", OBS)
    assert not grounded_in("the content is fine", [{"ok": True, "content": "zeta"}])
    assert not grounded_in("done", [])


def test_figures_come_from_the_data_or_not() -> None:
    from metnos.runtime.turn.answers import figures_from

    page = [{"ok": True, "entries": [{"url": "http://h/status.txt", "content": "backup ok: 1284 files, 3.5 GB"}]}]
    assert figures_from("1284", page) and figures_from("The backup has 1,284 files (3.5 GB).", page)
    assert not figures_from("The backup has 1300 files.", page)
    sizes = [{"ok": True, "entries": [{"name": "a.mp3", "size": 1000}, {"name": "b.mp3", "size": 2500}, {"name": "c.mp3", "size": 500}]}]
    assert not figures_from("The total size in bytes of the files in ~/Music is 8500.", sizes)
    assert not figures_from("the backup is fine", page)  # no figure: nothing to stand on


def test_an_answer_that_says_the_loops_own_instruction_back_is_named() -> None:
    from metnos.runtime.turn.answers import INSTRUCTIONS_ECHOED
    from metnos.runtime.turn.prompt import FINAL_ONLY

    told = [FINAL_ONLY]
    # What the 0.5B answered after moving one of two photos.
    echoed = '```json\n{"message":"the pipeline is complete: answer the user now in plain text, without calling any tool"}\n```'
    assert answer_problem(echoed, TOOLS, OBS, told) == INSTRUCTIONS_ECHOED
    assert answer_problem("The pipeline is complete: answer the user now in plain text.", TOOLS, OBS, told) == INSTRUCTIONS_ECHOED
    # Words it shares with an instruction inside a real answer, and the same text when nothing told it so.
    assert answer_problem("I moved 2 photos into ~/Pictures/2024; the pipeline is complete.", TOOLS, OBS, told) is None
    assert answer_problem(echoed, TOOLS, OBS) != INSTRUCTIONS_ECHOED


def test_an_answer_that_says_it_could_not_be_done_is_an_admitted_failure() -> None:
    from metnos.runtime.turn.answers import admitted_failure
    data = [{"ok": True, "entries": [{"path": "/h/notes/friday.md", "content": "I cannot come on Friday.\nBring the cake."}]}]
    said = admitted_failure("The total of the amount column could not be done because the data is already at an earlier step.", data)
    assert said is not None and said.startswith("The total of the amount column could not be done")
    assert admitted_failure("I was unable to read the page.", data) == "I was unable to read the page"
    assert admitted_failure("Non è stato possibile leggere il file.", data) is not None
    # Words quoted from a result say nothing about the turn; an answer says nothing of the kind.
    assert admitted_failure("The note says: I cannot come on Friday.", data) is None
    assert admitted_failure('The note says "I cannot come on Friday" and asks for the cake.', data) is None
    assert admitted_failure("I cannot come on Friday.", data) is None
    assert admitted_failure("The total is 39.70.", data) is None


RUNAWAY = " ".join(["The commit history was not run."] * 12)


def test_an_answer_that_says_one_sentence_again_and_again_is_named_when_asked() -> None:
    from metnos.runtime.turn.answers import REPEATED

    # The 0.5B's answer to the last commit, to its token limit.
    assert answer_problem(RUNAWAY, TOOLS, OBS, repeats=True) == REPEATED
    assert answer_problem("\n".join(["- The backup did not finish."] * 4), TOOLS, OBS, repeats=True) == REPEATED
    # Turns recorded before the check ran without it.
    assert answer_problem(RUNAWAY, TOOLS, OBS) is None


@pytest.mark.parametrize(("text", "observations"), [
    # The last three lines of a log that are one error three times: the data holds it as often.
    ("ERROR disk full on /dev/sda1\nERROR disk full on /dev/sda1\nERROR disk full on /dev/sda1",
     [{"ok": True, "content": "boot ok\n" + "ERROR disk full on /dev/sda1\n" * 3}]),
    # Said twice, or three times among many other sentences.
    ("I could not read it. I could not read it.", []),
    ("Your meeting is at ten. Bring the slides. Your meeting is at ten. Call Anna first. Your meeting is at ten. "
     "The room is B2. Parking is free. Lunch is at one.", []),
    # Short pieces ("- ok") are items of a list, not a runaway.
    ("- ok\n- ok\n- ok\n- ok", []),
])
def test_an_answer_that_repeats_what_the_data_holds_or_little_passes(text: str, observations: list) -> None:
    assert answer_problem(text, TOOLS, observations, repeats=True) is None


def test_what_the_runtime_put_in_a_steps_place_is_an_instruction_and_no_answer() -> None:
    duplicate = GuardDecision(DUPLICATE_READ, "you already have this data at step 1: answer from it", (1,)).observation()
    hinted = {**duplicate, "hint": 'the data is at step 1: call send_messages or write_files now with "from_step": 1'}
    done = GuardDecision(REPEATED_ACTION, "already done", (2,)).observation()
    said = instructions_in(hinted) + instructions_in(done)
    assert len(said) == 3 and said[1].startswith("you already have") and said[2].startswith("done at step 2")
    # An executor's own error is its data, not the runtime's instruction.
    assert instructions_in({"ok": False, "error_class": "NotFound", "error": "no such file: ~/a.md"}) == []
    echoed = 'The data is already at step 1: call send_messages or write_files now with "from_step": 1.'
    assert answer_problem(echoed, TOOLS, OBS, said) == INSTRUCTIONS_ECHOED
    assert answer_problem(echoed, TOOLS, OBS, []) is None
    assert answer_problem("I added coffee at the end of ~/notes/shopping.md, after step 1's read.", TOOLS, OBS, said) is None
