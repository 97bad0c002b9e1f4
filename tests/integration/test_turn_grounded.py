"""Issue 30 item 1 and 2 end to end: a turn is ``answered`` only when its answer holds
up against what the steps returned, and an exact ask is worked out by a step.

The model is scripted (a real HTTP server on 127.0.0.1); the executors run for real."""

from __future__ import annotations

from pathlib import Path

import orjson

from metnos.adapters.cli import main
from tests.support.scripted_llm import ScriptedLLM, call, text

DIARY = "mon: rain\ntue: sun\nwed: wind\nthu: snow\nfri: fog\n"
ASK = "read ~/notes/diary.md and tell me the last three lines"


def ask(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["ask", *argv, "--json"])
    return code, orjson.loads(capsys.readouterr().out)


def topics(capsys, turn_id: str) -> list[dict]:
    capsys.readouterr()
    main(["events", "--json", "--aggregate", turn_id])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def scripted_ask(capsys, monkeypatch, script: list, request: str) -> tuple[int, dict]:
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        return ask(capsys, request)


def _docs(home: Path) -> None:
    (home / "docs").mkdir()
    for name in ("a.txt", "b.txt"):
        (home / "docs" / name).write_text("x")


def _diary(home: Path) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "diary.md").write_text(DIARY)


def test_all_five_lines_for_the_last_three_is_never_answered(home: Path, capsys, monkeypatch) -> None:
    """Told once, the model gives the five lines again: Metnos works the ask out
    with the slicing step itself and answers from it."""
    _diary(home)
    five = "The last three lines are:\n" + DIARY
    with ScriptedLLM([text(five), text(five)], dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, ASK)
        assert (code, out["status"]) == (0, "answered"), out
        assert out["answer"] == "wed: wind\nthu: snow\nfri: fog"
        # The model was told once what did not hold up, and which call works it out.
        told = [m["content"] for m in llm.requests[1].body["messages"] if m["role"] == "user"][-1]
        assert "does not match the results" in told and "the last 3 lines" in told
        assert 'call extract_lines first, with arguments {"from_step": 1, "last": 3}' in told
    events = topics(capsys, out["turn_id"])
    kinds = [e["topic"].rsplit(".", 1)[-1] for e in events]
    assert kinds.count("AnswerUngrounded") == 2 and kinds[-1] == "TurnAnswered"
    proposed = [e["state"] for e in events if e["topic"].endswith("StepProposed")]
    assert [p["executor"] for p in proposed] == ["read_files", "extract_lines"]
    assert [e["state"]["reason"] for e in events if e["topic"].endswith("AnswerComposed")] == ["exact_ask"]
    capsys.readouterr()
    assert main(["replay", "--all"]) == 0


def test_the_k_largest_are_worked_out_by_a_sort_when_the_model_guesses(home: Path, capsys, monkeypatch) -> None:
    (home / "docs").mkdir()
    for name, size in (("a.txt", 1), ("b.txt", 30), ("c.txt", 20)):
        (home / "docs" / name).write_text("x" * size)
    guess = "The 2 largest files are a.txt and b.txt."
    with ScriptedLLM([call("find_files", {"base_path": "~/docs"}), text(guess), text(guess)], dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, "which are the 2 largest files in ~/docs")
        assert (code, out["status"]) == (0, "answered"), out
        assert out["answer"] == "~/docs/b.txt\n~/docs/c.txt"


def test_the_top_row_of_a_table_is_worked_out_by_the_column_the_request_names(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B read a CSV, took its last line, and answered that line's item as the highest
    twice: Metnos sorts the table's rows by the column the request names, not the slice."""
    (home / "receipts").mkdir()
    (home / "receipts" / "shop.csv").write_text("date,item,amount\n03-01,bread,3.20\n03-01,olive oil,12.75\n03-05,rice,2.35\n")
    guess = "The item with the highest amount is rice, 2.35."
    script = [call("read_files", {"paths": ["~/receipts/shop.csv"]}),
              call("extract_lines", {"content": "{{step1.content}}", "last": 1}), text(guess), text(guess)]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, "Which item in ~/receipts/shop.csv has the highest amount?")
        assert (code, out["status"]) == (0, "answered"), out
        assert "olive oil" in out["answer"] and "rice" not in out["answer"], out["answer"]


def test_a_slice_call_without_its_count_takes_the_count_the_request_gives(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B sent extract_lines with no first or last for "the last three lines": the request's count is
    the call's, said as completed from the request (it failed before, and the turn with it)."""
    _diary(home)
    script = [call("read_files", {"paths": ["~/notes/diary.md"]}), call("extract_lines", {"from_step": 1}),
              text("wed: wind\nthu: snow\nfri: fog")]
    code, out = scripted_ask(capsys, monkeypatch, script, ASK)
    assert (code, out["status"]) == (0, "answered"), out
    events = topics(capsys, out["turn_id"])
    resolved = [e["state"] for e in events if e["topic"].endswith("StepResolved")][-1]
    assert resolved["args"]["last"] == 3 and resolved["completed"]["last"] == 3, resolved
    capsys.readouterr()
    assert main(["replay", "--all"]) == 0


def test_the_first_item_is_worked_out_of_the_file_not_of_the_model_s_own_first_line(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B took the file's first line ("# Todo") for its first item (here by saying lines, not items,
    which a call that says neither now gets completed), then answered right twice: Metnos works the ask
    out of the file it read, not of that line, which holds no item."""
    (home / "lists").mkdir()
    (home / "lists" / "todo.md").write_text("# Todo\n\n- renew the library card\n- call the plumber\n")
    right = 'The first item on your todo list is "renew the library card".'
    script = [call("read_files", {"paths": ["~/lists/todo.md"]}),
              call("extract_lines", {"content": "{{step1.content}}", "first": 1, "items": False}), text(right), text(right)]
    code, out = scripted_ask(capsys, monkeypatch, script, "What is the first item on my todo list in ~/lists/todo.md?")
    assert (code, out["status"]) == (0, "answered"), out
    assert out["answer"] == "renew the library card", out
    events = topics(capsys, out["turn_id"])
    proposed = [e["state"] for e in events if e["topic"].endswith("StepProposed")]
    assert proposed[-1]["executor"] == "extract_lines" and proposed[-1]["args"]["from_step"] == 1, proposed[-1]
    capsys.readouterr()
    assert main(["replay", "--all"]) == 0


def test_an_exact_ask_no_step_can_work_out_ends_unverified(home: Path, capsys, monkeypatch) -> None:
    guess = "Your diary ends with:\nsee you\ngoodbye"
    with ScriptedLLM([text(guess), text(guess)], dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, "tell me the last two lines of my diary")
        assert (code, out["status"]) == (5, "unverified"), out
        assert out["answer"] == guess
        assert "no step worked them out" in out["failure"]["exactness"]
        assert set(out["failure"]["unmatched"]) == {"see you", "goodbye"}
    kinds = [e["topic"].rsplit(".", 1)[-1] for e in topics(capsys, out["turn_id"])]
    assert "TurnAnswered" not in kinds and kinds[-1] == "TurnFailed"
    capsys.readouterr()
    assert main(["replay", "--all"]) == 0


def test_told_once_the_model_works_the_lines_out_and_the_turn_is_answered(home: Path, capsys, monkeypatch) -> None:
    _diary(home)
    script = [text("The last three lines are:\n" + DIARY), call("extract_lines", {"from_step": 1, "last": 3}),
              text("The last three lines are:\nwed: wind\nthu: snow\nfri: fog")]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, ASK)
        assert (code, out["status"]) == (0, "answered"), out
        assert out["answer"].splitlines()[1:] == ["wed: wind", "thu: snow", "fri: fog"]
        assert "extract_lines" in [t["function"]["name"] for t in llm.requests[0].body["tools"]]


def test_a_machine_name_no_step_gave_is_unverified(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B answered "from_location: town" to where the user is, with no step run, and the turn said answered."""
    said = "from_location: town"
    code, out = scripted_ask(capsys, monkeypatch, [text(said), text(said)], "Which town am I in, going by my settings?")
    assert (code, out["status"]) == (5, "unverified"), out
    assert out["failure"]["unmatched"] == ["from_location"], out


def test_an_executor_named_in_the_answer_holds_up(home: Path, capsys, monkeypatch) -> None:
    said = "Ask read_files for your settings file first; no step has run yet."
    code, out = scripted_ask(capsys, monkeypatch, [text(said)], "Which town am I in, going by my settings?")
    assert (code, out["status"]) == (0, "answered"), out


def test_a_count_found_in_no_result_is_unverified(home: Path, capsys, monkeypatch) -> None:
    _docs(home)
    # A count no digit of the test's own folder holds (pytest-7's listing holds a 7).
    count = next(str(n) for n in range(7, 100) if str(n) not in str(home))
    wrong = f"There are {count} files in ~/docs, among them c.txt."
    # The model's own listing is the turn's one read: no data it asked for twice stands in for its answer.
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    code, out = scripted_ask(capsys, monkeypatch, [call("find_files", {"base_path": "~/docs"}), text(wrong), text(wrong)],
                             "list the files in ~/docs")
    assert (code, out["status"]) == (5, "unverified"), out
    assert set(out["failure"]["unmatched"]) == {count, "c.txt"}
    assert f"'{count}'" in out["failure"]["message"] and "'c.txt'" in out["failure"]["message"]


def test_a_wrong_listing_after_a_repeated_read_is_replaced_by_the_listing(home: Path, capsys, monkeypatch) -> None:
    _docs(home)
    wrong = "There are 7 files in ~/docs, among them c.txt."
    # The opening read lists the folder; the model lists it again, then answers what the listing does not say.
    code, out = scripted_ask(capsys, monkeypatch, [call("find_files", {"base_path": "~/docs"}), text(wrong), text(wrong)],
                             "list the files in ~/docs")
    assert (code, out["status"]) == (0, "answered"), out
    # The count the model made up, not a digit of the test's own folder (pytest-1107 held a 7).
    assert "a.txt" in out["answer"] and "b.txt" in out["answer"] and "c.txt" not in out["answer"] and "7 files" not in out["answer"]


def test_an_answer_from_the_results_is_answered_first_time(home: Path, capsys, monkeypatch) -> None:
    (home / "docs").mkdir()
    for name in ("a.txt", "b.txt"):
        (home / "docs" / name).write_text("x")
    with ScriptedLLM([call("find_files", {"base_path": "~/docs"}), text("There are 2 files in ~/docs: a.txt and b.txt.")],
                     dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, "list the files in ~/docs")
        assert (code, out["status"]) == (0, "answered"), out
        assert len(llm.requests) == 2


def test_an_answer_that_denies_the_file_the_turn_read_is_replaced_by_its_data(home: Path, capsys, monkeypatch) -> None:
    """Told its read was already done, the 1.5B answered that the file it read does not exist:
    the denial is never answered; the data it asked for twice is the answer."""
    (home / "notes.md").write_text("buy milk\ncall Anna\n")
    denial = "The file notes.md does not exist."
    reread = call("read_files", {"paths": ["~/notes.md"]})
    code, out = scripted_ask(capsys, monkeypatch, [reread, reread, text(denial), text(denial)], "read ~/notes.md and tell me what it says")
    assert (code, out["status"]) == (0, "answered"), out
    assert "buy milk" in out["answer"] and "call Anna" in out["answer"] and "not exist" not in out["answer"]
    events = topics(capsys, out["turn_id"])
    ungrounded = [e["state"] for e in events if e["topic"].endswith("AnswerUngrounded")]
    assert len(ungrounded) == 2 and all(u["denied"] == ["notes.md"] for u in ungrounded)
    assert [e["state"]["reason"] for e in events if e["topic"].endswith("AnswerComposed")] == ["duplicate_read_repeated"]
    capsys.readouterr()
    assert main(["replay", "--all"]) == 0


def test_a_denial_where_the_data_is_no_answer_stays_unverified(home: Path, capsys, monkeypatch) -> None:
    """A count is asked for: the file's text handed back would read as answered, so the turn says it could not."""
    (home / "notes.md").write_text("buy milk\ncall Anna\n")
    denial = "The file notes.md does not exist."
    reread = call("read_files", {"paths": ["~/notes.md"]})
    _, out = scripted_ask(capsys, monkeypatch, [reread, reread, text(denial), text(denial)], "read ~/notes.md and tell me how many lines it has")
    assert out["status"] != "answered", out
    events = topics(capsys, out["turn_id"])
    assert not any(e["topic"].endswith("TurnAnswered") for e in events)


def test_one_file_s_size_for_a_folder_s_total_is_sent_back_and_then_summed(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B's answer: the size of one file, a number the listing holds, for the space the folder takes.
    Told that no step added them up, the model sums them, and the turn is answered from the sum."""
    (home / "Music").mkdir()
    for name, size in (("a.mp3", 600), ("b.mp3", 900)):
        (home / "Music" / name).write_bytes(b"x" * size)
    request = "how much disk space do the files in ~/Music take?"
    script = [call("find_files", {"base_path": "~/Music"}), text("Disk space is 600 bytes."),
              call("compute_entries", {"from_step": 1, "op": "sum", "field": "size"}), text("They take 1500 bytes.")]
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, request)
        told = [m["content"] for m in llm.requests[2].body["messages"] if m["role"] == "user"][-1]
    assert (code, out["status"], out["answer"]) == (0, "answered", "They take 1500 bytes."), out
    assert "the request asks for a total, and the answer gives 600" in told
    events = topics(capsys, out["turn_id"])
    assert [e["state"]["exactness"][:50] for e in events if e["topic"].endswith("AnswerUngrounded")] == [
        "the request asks for a total, and the answer gives"]
    capsys.readouterr()
    assert main(["replay", "--all"]) == 0


def test_a_total_given_as_one_entry_twice_is_unverified(home: Path, capsys, monkeypatch) -> None:
    (home / "Music").mkdir()
    for name, size in (("a.mp3", 600), ("b.mp3", 900)):
        (home / "Music" / name).write_bytes(b"x" * size)
    one = text("Disk space is 600 bytes.")
    code, out = scripted_ask(capsys, monkeypatch, [call("find_files", {"base_path": "~/Music"}), one, one],
                             "how much disk space do the files in ~/Music take?")
    assert out["status"] == "unverified" and code != 0, out
    assert "the request asks for a total" in orjson.dumps(out).decode()
