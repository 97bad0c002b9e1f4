"""Issue 17, items 3 and 4: the reads a turn opens with, and a failed call that is not run twice,
end to end through the CLI against a scripted model on 127.0.0.1, in both layouts."""

from __future__ import annotations

from pathlib import Path

import orjson

from metnos.adapters.cli import main
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.support.turn_log import events, of


def ask(monkeypatch, capsys, script, request: str) -> tuple[int, dict, ScriptedLLM]:
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        code = main(["ask", "--yes", "--json", request])
        out = orjson.loads(capsys.readouterr().out)
    return code, out, llm


def replays_clean(capsys, turn_id: str) -> bool:
    capsys.readouterr()
    return main(["replay", turn_id]) == 0


def test_a_named_file_is_read_before_the_model_is_asked(home: Path, capsys, monkeypatch) -> None:
    (home / "lists").mkdir()
    (home / "lists" / "todo.md").write_text("# Todo\n- renew the library card\n- call the plumber\n")
    guess = text("The first item is: renew the library card.")
    code, out, llm = ask(monkeypatch, capsys, [guess, guess], "What is the first item on my todo list in ~/lists/todo.md?")
    assert code == 0 and out["status"] == "answered", out
    # The model saw the file's content in its first prompt.
    first = llm.requests[0].messages
    assert [m["role"] for m in first] == ["system", "user", "assistant", "tool"]
    assert "renew the library card" in first[-1]["content"]
    # "The first item" is an exact ask: worked out by a step, not by the model's prose (issue 30).
    assert len(llm.requests) == 2 and out["answer"] == "renew the library card"
    evs = events(capsys, out["turn_id"])
    proposed = of(evs, "StepProposed")
    assert [(p["executor"], p["call_form"], p["args"]) for p in proposed] == [
        ("read_files", "opening_read", {"paths": ["~/lists/todo.md"]}),
        ("extract_lines", "working_out", {"from_step": 1, "first": 1, "items": True})]
    assert replays_clean(capsys, out["turn_id"])


def test_a_named_folder_is_listed_with_the_pattern_the_request_names(home: Path, capsys, monkeypatch) -> None:
    (home / "Downloads").mkdir()
    for name in ("a.tmp", "b.tmp", "keep.pdf"):
        (home / "Downloads" / name).write_text(name)
    script = [call("delete_files", {"from_step": 1}), text("Deleted a.tmp and b.tmp.")]
    code, out, llm = ask(monkeypatch, capsys, script, "Delete the .tmp files in ~/Downloads.")
    assert code == 0 and out["status"] == "answered", out
    assert sorted(p.name for p in (home / "Downloads").iterdir()) == ["keep.pdf"]
    proposed = of(events(capsys, out["turn_id"]), "StepProposed")
    assert proposed[0]["executor"] == "find_files" and proposed[0]["call_form"] == "opening_read"
    assert proposed[0]["args"] == {"base_path": "~/Downloads", "pattern": "*.tmp"}
    assert replays_clean(capsys, out["turn_id"])


def test_a_named_file_that_does_not_exist_yet_is_not_the_turns_problem(home: Path, capsys, monkeypatch) -> None:
    script = [call("write_files", {"files": [{"path": "~/notes/new.md", "content": "milk\n", "mode": "append"}]}), text("Added milk.")]
    code, out, llm = ask(monkeypatch, capsys, script, "Add milk at the end of my list ~/notes/new.md")
    assert code == 0 and out["status"] == "answered", out
    assert (home / "notes" / "new.md").read_text() == "milk\n"
    # The failed read is in the log, not in what the model was shown.
    assert [m["role"] for m in llm.requests[0].messages] == ["system", "user"]
    evs = events(capsys, out["turn_id"])
    observed = of(evs, "ObservationRecorded")
    assert observed[0]["step"] == 1 and observed[0]["observation"]["ok"] is False
    assert replays_clean(capsys, out["turn_id"])


def test_the_same_failing_call_is_not_run_again(home: Path, capsys, monkeypatch) -> None:
    (home / "r.csv").write_text("item,amount\nbread,2\nmilk,3\n")
    bad = call("compute_entries", {"op": "sum", "from_step": 1})
    script = [bad, bad, bad, text("I could not add them up.")]
    code, out, llm = ask(monkeypatch, capsys, script, "What is the total of ~/r.csv?")
    # A step on the read's data that failed is the turn's problem: "I could not add them up" is not an
    # answer to the total, and the turn says what failed (docs/turns.md, "A loop that recovers").
    assert out["status"] == "failed" and "compute_entries failed: op 'sum' needs a field" in out["failure"]["detail"], out
    # The failure names the fields the model could have used.
    failure = orjson.loads(llm.requests[1].messages[-1]["content"])
    assert failure["ok"] is False and "'item', 'amount'" in failure["error"]["message"], failure
    evs = events(capsys, out["turn_id"])
    assert [i["executor"] for i in of(evs, "StepInvoked")] == ["read_files", "compute_entries"]
    assert [d["decision"]["outcome"] for d in of(evs, "StepIntercepted")] == ["repeated_failure", "repeated_failure"]
    # After the second repeat the model is asked to answer in words: the same tools, so the
    # prompt keeps its prefix for the server's cache, and tool_choice "none".
    assert llm.requests[3].body["tool_choice"] == "none" and llm.requests[3].tool_names == llm.requests[2].tool_names
    assert "tool_choice" not in llm.requests[2].body
    assert replays_clean(capsys, out["turn_id"])


def test_a_call_refused_by_the_policy_is_not_proposed_to_the_end(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B moved ~/Desktop/cat.jpg to /home/metnos/Pictures (a home it made up), was
    refused by the policy, and sent the same call again four times, to the time limit."""
    (home / "Desktop").mkdir()
    (home / "Desktop" / "cat.jpg").write_text("c")
    bad = call("move_files", {"moves": [{"src": str(home / "Desktop" / "cat.jpg"), "dst": "/home/nobody-here/Pictures/cat.jpg"}]})
    code, out, llm = ask(monkeypatch, capsys, [bad, bad, bad, bad, bad, text("unused")], "Move the .jpg files on ~/Desktop into ~/Pictures.")
    assert out["status"] == "refused", out
    refused = orjson.loads(llm.requests[1].messages[-1]["content"])
    assert refused["error_class"] == "policy_violation" and "~/" in refused["hint"]
    evs = events(capsys, out["turn_id"])
    assert [r["kind"] for r in of(evs, "StepRejected")] == ["policy"]
    assert [d["decision"]["outcome"] for d in of(evs, "StepIntercepted")] == ["repeated_failure", "repeated_failure"]
    assert len(llm.requests) <= 5 and (home / "Desktop" / "cat.jpg").exists()
    assert replays_clean(capsys, out["turn_id"])


def test_a_path_the_request_names_written_without_its_home_is_completed(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B wrote "notes/bank.md" for the request's ~/notes/bank.md: refused as relative,
    then written again the same way until the turn ended."""
    (home / "notes").mkdir()
    script = [call("write_files", {"files": [{"path": "notes/bank.md", "content": "call the bank on Friday"}]}),
              text("Saved.")]
    code, out, llm = ask(monkeypatch, capsys, script, "Save the text 'call the bank on Friday' to ~/notes/bank.md.")
    assert code == 0 and out["status"] == "answered", out
    assert (home / "notes" / "bank.md").read_text() == "call the bank on Friday"
    resolved = of(events(capsys, out["turn_id"]), "StepResolved")
    assert resolved[-1]["completed"] == {"/files/0/path": "~/notes/bank.md"}
    assert replays_clean(capsys, out["turn_id"])


def test_a_relative_path_the_request_does_not_name_is_still_refused(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    script = [call("write_files", {"files": [{"path": "notes/other.md", "content": "x"}]}), text("Saved.")]
    code, out, llm = ask(monkeypatch, capsys, script, "Save the text 'x' to ~/notes/bank.md.")
    assert out["status"] != "answered", out
    rejected = of(events(capsys, out["turn_id"]), "StepRejected")
    assert rejected and rejected[0]["kind"] == "policy" and "relative" in orjson.dumps(rejected[0]["error"]).decode()
    assert not (home / "notes" / "other.md").exists() and not (home / "notes" / "bank.md").exists()


def test_the_field_the_request_names_completes_a_call_without_one(home: Path, capsys, monkeypatch) -> None:
    (home / "r.csv").write_text("item,amount\nbread,2.5\nmilk,3\n")
    script = [call("compute_entries", {"op": "sum", "from_step": 1}), text("The total is 5.5.")]
    code, out, llm = ask(monkeypatch, capsys, script, "What is the total of the amount column in ~/r.csv?")
    assert code == 0 and out["status"] == "answered", out
    # The sum is a single value: the model is asked for its answer in words, after the result.
    assert orjson.loads([m for m in llm.requests[1].messages if m["role"] == "tool"][-1]["content"])["content"] == 5.5
    assert llm.requests[1].body["tool_choice"] == "none"
    resolved = of(events(capsys, out["turn_id"]), "StepResolved")
    assert resolved[1]["completed"] == {"field": "amount"} and resolved[1]["args"]["field"] == "amount"
    assert replays_clean(capsys, out["turn_id"])


def test_a_read_only_request_whose_model_only_asks_for_tools_is_answered_with_the_data(home: Path, capsys, monkeypatch) -> None:
    from tests.support.scripted_llm import text_call

    (home / "a.md").write_text("alpha\nbeta\n")
    again = text_call("find_files", {"base_path": "~"})
    code, out, llm = ask(monkeypatch, capsys, [call("get_now", {}), again, again, text("unused")], "What does ~/a.md say?")
    assert code == 0 and out["status"] == "answered", out
    # Holding data, the model read something else: a request that changes nothing is then
    # asked for its answer in words (tool_choice "none", the same tools, the request restated last).
    assert [r.body.get("tool_choice") for r in llm.requests] == [None, "none", "none"]
    assert llm.requests[1].tool_names == llm.requests[0].tool_names
    assert llm.requests[0].messages == llm.requests[1].messages[:len(llm.requests[0].messages)]
    assert llm.requests[1].messages[-1]["role"] == "user" and "My request: What does ~/a.md say?" in llm.requests[1].messages[-1]["content"]
    assert of(events(capsys, out["turn_id"]), "AnswerComposed") == [{"from_steps": [1, 2], "reason": "no_answer_after_data"}]
    assert out["answer"].startswith("alpha\nbeta")
    assert replays_clean(capsys, out["turn_id"])
