"""Issue 17, items 2 and 4: honest outcomes and a loop that recovers, end to end
through the CLI against a scripted model on 127.0.0.1."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from tests.support.scripted_llm import ScriptedLLM, Step, call, call_raw, text
from tests.support.turn_log import events, of


def ask(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["ask", *argv, "--json"])
    return code, orjson.loads(capsys.readouterr().out)


def run(monkeypatch, capsys, script, *argv: str) -> tuple[int, dict, ScriptedLLM]:
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, *argv)
    return code, out, llm


def replays_clean(capsys, turn_id: str) -> bool:
    capsys.readouterr()
    return main(["replay", turn_id]) == 0


def tool_messages(request) -> list[dict]:
    return [orjson.loads(m["content"]) for m in request.body["messages"] if m["role"] == "tool"]


# Item 2: what is not an answer -------------------------------------------------

@pytest.mark.parametrize(("bad", "reason"), [
    ("read_files", "tool_name"),
    ('{"ok": true, "content": "alpha"}', "raw_tool_output"),
    ('{"name": "read_files", "arguments": {"paths": 5}}', "tool_call_as_text"),  # not a valid call: stays text
    ("write_files(path='~/b.md')", "tool_call_as_text"),
    ("The tool returned:", "stub"),
    ("", "empty"),
])
def test_a_non_answer_is_sent_back_once_then_a_real_answer_is_answered(home: Path, capsys, monkeypatch, bad: str, reason: str) -> None:
    (home / "a.md").write_text("alpha")
    script = [call("read_files", {"paths": ["~/a.md"]}), text(bad), text("The file says alpha.")]
    code, out, llm = run(monkeypatch, capsys, script, "read ~/a.md")
    assert code == 0 and out["status"] == "answered" and out["answer"] == "The file says alpha.", out
    correction = llm.requests[2].body["messages"][-1]
    assert correction["role"] == "user" and "not an answer" in correction["content"]
    assert [(r["reason"], r["round"]) for r in of(events(capsys, out["turn_id"]), "AnswerRejected")] == [(reason, 2)]
    assert replays_clean(capsys, out["turn_id"])


def test_two_non_answers_fail_the_turn(home: Path, capsys, monkeypatch) -> None:
    # The model makes the read itself (no opening read, which its read would repeat:
    # a repeated read makes the data the answer, test_turn_opening_reads.py).
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    (home / "a.md").write_text("alpha")
    script = [call("read_files", {"paths": ["~/a.md"]}), text("read_files"), text("The tool returned:")]
    code, out, _ = run(monkeypatch, capsys, script, "read ~/a.md")
    assert code == 1 and out["status"] == "failed" and out["failure"]["kind"] == "unusable_answer", out
    failed = of(events(capsys, out["turn_id"]), "TurnFailed")
    assert failed[0]["status"] == "failed"
    assert replays_clean(capsys, out["turn_id"])


def test_the_loops_own_instruction_said_back_is_not_an_answer(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B moved a photo, proposed the same move again (refused: the pipeline was
    closed), and answered with the loop's instruction to answer, as JSON: the turn said
    `answered`."""
    (home / "in").mkdir()
    (home / "in" / "a.jpg").write_text("a")
    move = call("move_files", {"moves": [{"src": "~/in/a.jpg", "dst": "~/out/a.jpg"}]})
    echo = text('```json\n{"message":"the pipeline is complete: answer the user now in plain text, without calling any tool"}\n```')
    code, out, llm = run(monkeypatch, capsys, [move, move, echo, text("I moved a.jpg into ~/out.")], "--yes", "Move ~/in/a.jpg into ~/out.")
    assert out["status"] == "answered" and out["answer"] == "I moved a.jpg into ~/out.", out
    [rejected] = of(events(capsys, out["turn_id"]), "AnswerRejected")
    assert rejected["reason"] == "instructions_echoed"
    assert replays_clean(capsys, out["turn_id"])
    back = call("move_files", {"moves": [{"src": "~/out/a.jpg", "dst": "~/in/a.jpg"}]})
    code, out, llm = run(monkeypatch, capsys, [back, echo, echo], "--yes", "Move ~/out/a.jpg into ~/in.")
    assert out["status"] == "failed" and out["failure"]["kind"] == "unusable_answer", out


def test_a_crash_followed_by_a_used_success_is_answered(home: Path, capsys, monkeypatch) -> None:
    # The first read is refused by the sandbox policy (outside the home); the
    # second succeeds and the answer uses it: answered.
    (home / "a.md").write_text("alpha")
    script = [call("read_files", {"paths": ["/etc/shadow"]}), call("read_files", {"paths": ["~/a.md"]}), text("It says alpha.")]
    code, out, _ = run(monkeypatch, capsys, script, "read my note")
    assert code == 0 and out["answer"] == "It says alpha.", out


def test_an_action_that_succeeds_after_a_refusal_is_answered(home: Path, capsys, monkeypatch) -> None:
    script = [call("write_files", {"files": [{"path": "/etc/metnos-test.txt", "content": "x"}]}),
              call("write_files", {"files": [{"path": "~/out.txt", "content": "x"}]}), text("Saved.")]
    code, out, _ = run(monkeypatch, capsys, script, "write x to a file", "--yes")
    assert code == 0 and out["answer"] == "Saved.", out
    assert (home / "out.txt").read_text() == "x"


def test_a_refused_step_with_an_answer_that_uses_nothing_is_refused(home: Path, capsys, monkeypatch) -> None:
    (home / "a.md").write_text("alpha")
    script = [call("read_files", {"paths": ["/etc/shadow"]}), call("read_files", {"paths": ["~/a.md"]}), text("Done, all good.")]
    code, out, _ = run(monkeypatch, capsys, script, "read the shadow file")
    assert code == 3 and out["status"] == "refused", out
    assert "read_files was refused by the sandbox policy" in out["failure"]["message"]


def test_a_read_of_a_name_the_model_made_up_is_no_fact_to_answer_with(home: Path, capsys, monkeypatch) -> None:
    # "No such file" answers a request that named the file; for a path of the model's own
    # invention it says only that the guess was wrong, and the turn says it could not.
    (home / "notes").mkdir()
    (home / "notes" / "plans.md").write_text("- paint the fence\n")
    guessed = [call("read_files", {"paths": ["~/notes/garden_plans.txt"]}), text("There are no garden plans.")]
    code, out, _ = run(monkeypatch, capsys, guessed, "what are my plans for the garden?")
    assert code != 0 and out["status"] == "failed", out
    assert "garden_plans.txt" in out["failure"]["message"], out
    named = [call("read_files", {"paths": ["~/notes/garden.txt"]}), text("There is no file ~/notes/garden.txt.")]
    code, out, _ = run(monkeypatch, capsys, named, "what does ~/notes/garden.txt say?")
    assert code == 0 and out["status"] == "answered", out


def test_a_request_for_two_actions_is_not_answered_after_one(home: Path, capsys, monkeypatch) -> None:
    (home / "old.tmp").write_text("x")
    request = "delete ~/old.tmp and then send lucia a message saying it is done"
    one = [call("delete_files", {"paths": ["~/old.tmp"]}), text("The file was deleted."), text("The file was deleted.")]
    code, out, llm = run(monkeypatch, capsys, one, request, "--yes")
    assert code != 0 and out["status"] != "answered", out
    assert "send_messages" in out["failure"]["message"], out
    reminder = llm.requests[2].body["messages"][-1]["content"]
    assert "send_messages" in reminder, reminder
    (home / "old.tmp").write_text("x")
    both = [call("delete_files", {"paths": ["~/old.tmp"]}), text("The file was deleted."),
            call("send_messages", {"messages": [{"to_user": "lucia", "body": "it is done"}]}), text("Deleted, and lucia is told.")]
    code, out, _ = run(monkeypatch, capsys, both, request, "--yes")
    assert code == 0 and out["status"] == "answered", out


def test_an_old_turn_failed_event_without_status_reads_as_failed(home: Path, capsys, monkeypatch) -> None:
    # A TurnFailed written before statuses existed (class version 1, no status
    # field) still loads, folds and shows as failed.
    from datetime import datetime, timezone
    from uuid import uuid4

    from domain.turn import Turn
    from metnos.mechanisms.eventlog import EventLog
    from metnos.settings.workspace import Workspace

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    turn = Turn.start(id=uuid4(), at=at, text="an old request", actor="user", channel="cli", mode="local", settings={}, runtime_version="0.0.1")
    turn.record(Turn.TurnFailed, at=at, kind="cap_steps", final_kind="cap_steps", message="Stopped after 3 steps.", steps=3)
    del turn.pending_events[-1].__dict__["status"]
    log = EventLog(Workspace.from_env())
    try:
        with monkeypatch.context() as m:
            m.setattr(Turn.TurnFailed, "class_version", 1)
            log.save(turn)
    finally:
        log.close()
    capsys.readouterr()
    assert main(["turns", "list", "--json"]) == 0
    rows = {r["id"]: r for r in orjson.loads(capsys.readouterr().out)}
    assert rows[str(turn.id)]["status"] == "failed"
    assert main(["turns", "show", str(turn.id)[:8]]) == 0
    assert "failed (cap_steps): Stopped after 3 steps." in capsys.readouterr().out


# Item 4: a loop that recovers ---------------------------------------------------

def test_arguments_that_are_not_json_get_one_correction(home: Path, capsys, monkeypatch) -> None:
    # The model makes the first read itself here (no opening read): this test is about what follows it.
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    (home / "a.md").write_text("alpha")
    script = [call_raw("read_files", '{"paths": ["~/a.md"'), call("read_files", {"paths": ["~/a.md"]}), text("It says alpha.")]
    code, out, llm = run(monkeypatch, capsys, script, "read ~/a.md")
    assert code == 0 and out["answer"] == "It says alpha.", out
    first = tool_messages(llm.requests[1])[0]
    assert first["error_class"] == "invalid_arguments" and "not valid JSON" in first["error"] and first["hint"]
    rejected = of(events(capsys, out["turn_id"]), "StepRejected")
    assert [r["kind"] for r in rejected] == ["arguments"]
    assert replays_clean(capsys, out["turn_id"])


def test_a_second_unusable_call_in_a_row_ends_the_turn(home: Path, capsys, monkeypatch) -> None:
    script = [call_raw("read_files", "{oops"), call("read_files", {"paths": 5}), text("never asked")]
    code, out, llm = run(monkeypatch, capsys, script, "read ~/a.md")
    assert code == 1 and out["failure"]["kind"] == "invalid_arguments", out
    assert len(llm.requests) == 2


def test_a_repeated_duplicate_read_ends_with_the_data_already_there(home: Path, capsys, monkeypatch) -> None:
    (home / "a.md").write_text("alpha\nbeta\n")
    same = call("read_files", {"paths": ["~/a.md"]})
    code, out, llm = run(monkeypatch, capsys, [same, same, same, same, text("unused")], "read ~/a.md")
    assert code == 0 and out["status"] == "answered" and out["answer"] == "alpha\nbeta", out
    assert len(llm.requests) == 3  # the read, the interception, then the repeat ends it
    evs = events(capsys, out["turn_id"])
    assert [d["decision"]["outcome"] for d in of(evs, "StepIntercepted")] == ["duplicate_read", "duplicate_read_repeated"]
    assert of(evs, "AnswerComposed") == [{"from_steps": [1], "reason": "duplicate_read_repeated"}]
    assert replays_clean(capsys, out["turn_id"])


def test_a_request_for_a_figure_is_not_answered_with_the_data_it_was_to_be_worked_out_from(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B read ~/receipts/groceries.csv again and again for "the total of the amount
    column"; the turn said `answered` with the CSV."""
    (home / "r.csv").write_text("item,amount\nbread,2.5\nmilk,3\n")
    same = call("read_files", {"paths": ["~/r.csv"]})
    code, out, llm = run(monkeypatch, capsys, [same, same, same, text("unused")], "What is the total of the amount column in ~/r.csv?")
    assert out["status"] == "failed" and out["failure"]["kind"] == "unusable_answer", out
    assert "never worked out from the data of step 1" in out["failure"]["message"]
    assert replays_clean(capsys, out["turn_id"])
    # Worked out, the figure is an answer even when the model then asks for a tool again.
    compute = call("compute_entries", {"op": "sum", "from_step": 1, "field": "amount"})
    code, out, llm = run(monkeypatch, capsys, [compute, compute, compute, text("unused")], "What is the total of the amount column in ~/r.csv?")
    assert out["status"] == "answered" and "5.5" in out["answer"], out


def test_a_request_for_an_action_is_not_answered_with_the_data_when_the_action_never_ran(home: Path, capsys, monkeypatch) -> None:
    """What the 0.5B did on "compute the total of ... and write it to ~/receipts/total.txt": it
    asked for the CSV again and again; the turn said `answered` with the CSV, no file written."""
    (home / "r.csv").write_text("item,amount\nbread,2\nmilk,3\n")
    same = call("read_files", {"paths": ["~/r.csv"]})
    code, out, llm = run(monkeypatch, capsys, [same, same, same, same, text("unused")], "add up ~/r.csv and write the total to ~/total.txt")
    assert code == 1 and out["status"] == "failed" and out["failure"]["kind"] == "action_not_taken", out
    assert "write_files" in out["failure"]["message"] and not (home / "total.txt").exists()
    assert of(events(capsys, out["turn_id"]), "AnswerComposed") == []
    assert replays_clean(capsys, out["turn_id"])


def test_words_before_the_action_get_one_reminder_then_the_action_runs(home: Path, capsys, monkeypatch) -> None:
    """What the 1.5B did on "find the largest PDF in ~/Documents and send its name to marco":
    it answered "The largest PDF is atlas.pdf" and the turn said answered, with no message sent."""
    (home / "Documents").mkdir()
    (home / "Documents" / "atlas.pdf").write_bytes(b"%PDF" * 100)
    send = call("send_messages", {"messages": [{"to_user": "marco", "body": "atlas.pdf"}]})
    script = [text("The largest PDF in ~/Documents is atlas.pdf."), send, text("Sent atlas.pdf to marco.")]
    code, out, llm = run(monkeypatch, capsys, script, "Find the largest PDF in ~/Documents and send its name to marco.", "--yes")
    assert code == 0 and out["answer"] == "Sent atlas.pdf to marco.", out
    reminder = llm.requests[1].body["messages"][-1]
    assert reminder["role"] == "user" and "send_messages" in reminder["content"] and "not called" in reminder["content"]
    assert [r["reason"] for r in of(events(capsys, out["turn_id"]), "AnswerRejected")] == ["action_not_taken"]
    assert replays_clean(capsys, out["turn_id"])


def test_an_action_that_reports_a_failure_is_not_answered_as_done(home: Path, capsys, monkeypatch) -> None:
    (home / "Downloads").mkdir()
    (home / "Downloads" / "x.tmp").write_text("x")
    script = [call("find_files", {"base_path": "~/Downloads", "pattern": "*.tmp"}),
              call("delete_files", {"from_step": 1}),
              call("send_messages", {"messages": [{"to_user": "elena", "body": "done", "channel": "pigeon"}]}),
              text("Deleted x.tmp and told elena.")]
    code, out, llm = run(monkeypatch, capsys, script, "Delete the .tmp files in ~/Downloads and then send elena a message saying it is done.", "--yes")
    assert code == 1 and out["failure"]["kind"] == "step_failed" and "pigeon" in out["failure"]["message"], out
    assert not (home / "Downloads" / "x.tmp").exists()


def test_a_move_elsewhere_than_the_folder_the_request_names_is_refused_before_it_runs(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B moved the photos a request named somewhere else than the folder it said, and the turn
    said answered: the call is refused saying where they go, and the one that moves them there runs.
    With the setting off (turns recorded before it), the call runs as it was given."""
    (home / "camera").mkdir()
    (home / "photos" / "2024").mkdir(parents=True)
    for name in ("a.jpg", "b.jpg"):
        (home / "camera" / name).write_text(name)
    beside = call("move_files", {"moves": [{"src": "~/camera/a.jpg", "dst": "~/photos/a.jpg"},
                                           {"src": "~/camera/b.jpg", "dst": "~/photos/2024/b.jpg"}]})
    inside = call("move_files", {"paths": ["~/camera/a.jpg", "~/camera/b.jpg"], "dest_dir": "~/photos/2024/"})
    request = "Move the .jpg files in ~/camera into ~/photos/2024."
    code, out, llm = run(monkeypatch, capsys, [beside, inside, text("Moved them into ~/photos/2024.")], request, "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert sorted(p.name for p in (home / "photos" / "2024").iterdir()) == ["a.jpg", "b.jpg"]
    assert not (home / "photos" / "a.jpg").exists()
    refused = of(events(capsys, out["turn_id"]), "StepRejected")
    assert [r["kind"] for r in refused] == ["destination"] and refused[0]["error"]["elsewhere"] == ["~/photos/a.jpg"], refused
    told = tool_messages(llm.requests[1])[-1]
    assert told["error_class"] == "outside_request" and '"dest_dir": "~/photos/2024"' in told["hint"], told
    assert replays_clean(capsys, out["turn_id"])

    for name in ("a.jpg", "b.jpg"):
        (home / "photos" / "2024" / name).rename(home / "camera" / name)
    code, out, _ = run(monkeypatch, capsys, [beside, text("Moved them.")], request, "--yes", "--set", "requested_destination=false")
    assert (code, out["status"]) == (0, "answered"), out
    assert (home / "photos" / "a.jpg").exists()


def test_the_model_reads_paths_in_the_home_as_tilde_paths(home: Path, capsys, monkeypatch) -> None:
    """Shown /tmp/.../Desktop/cat.jpg for a request about ~/Pictures, the 1.5B wrote
    /home/metnos/Pictures/cat.jpg, which the policy refused, five times."""
    (home / "Desktop").mkdir()
    (home / "Pictures").mkdir()
    (home / "Desktop" / "cat.jpg").write_bytes(b"jpg")
    move = call("move_files", {"moves": [{"src": "~/Desktop/cat.jpg", "dst": "~/Pictures/cat.jpg"}]})
    code, out, llm = run(monkeypatch, capsys, [move, text("Moved cat.jpg into ~/Pictures.")],
                         "Move the .jpg files on ~/Desktop into ~/Pictures.", "--yes")
    assert code == 0 and (home / "Pictures" / "cat.jpg").exists(), out
    shown = [m["content"] for m in llm.requests[0].body["messages"] if m["role"] == "tool"]
    assert shown and '"~/Desktop/cat.jpg"' in shown[0] and str(home) not in " ".join(shown), shown
    # The log keeps what the executor said, whole.
    listed = of(events(capsys, out["turn_id"]), "ObservationRecorded")[0]
    assert listed["observation"]["entries"][0]["path"] == str(home / "Desktop" / "cat.jpg")
    assert replays_clean(capsys, out["turn_id"])


def test_a_presentation_that_closes_a_read_only_request_is_its_answer(home: Path, capsys, monkeypatch) -> None:
    """Asked for words after describe_entries, the 1.5B copied the 20-line description
    back, token by token, in 118 s: the description is the answer."""
    (home / "notes").mkdir()
    (home / "notes" / "a.md").write_text("a")
    script = [call("describe_entries", {"from_step": 1}), text("never asked")]
    code, out, llm = run(monkeypatch, capsys, script, "List the markdown files in ~/notes.")
    assert code == 0 and "a.md" in out["answer"] and out["answer"] != "never asked", out
    assert len(llm.requests) == 1
    composed = of(events(capsys, out["turn_id"]), "AnswerComposed")
    assert [c["reason"] for c in composed] == ["presentation"]
    assert replays_clean(capsys, out["turn_id"])


def test_the_very_same_call_of_a_pure_executor_is_a_duplicate(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B listed ~/Downloads with the same arguments six times, then deleted a file
    that was not the largest. The second identical call is intercepted, and so is the third,
    told this time to act (the request asks for a delete); the delete of a file no sort put
    on top is refused: the turn fails, and nothing is deleted."""
    (home / "Downloads").mkdir()
    (home / "Downloads" / "a.zip").write_bytes(b"a" * 50)
    (home / "Downloads" / "movie.mkv").write_bytes(b"m" * 500)
    same = call("find_files", {"base_path": "~/Downloads", "max_results": 1})
    script = [same, same, same, call("delete_files", {"paths": ["~/Downloads/a.zip"]}), text("Deleted a.zip.")]
    code, out, llm = run(monkeypatch, capsys, script, "Find the largest file in ~/Downloads and delete it.", "--yes")
    assert code == 1 and out["status"] == "failed", out
    assert (home / "Downloads" / "a.zip").exists()
    evs = events(capsys, out["turn_id"])
    assert [d["decision"]["outcome"] for d in of(evs, "StepIntercepted")] == ["duplicate_read", "duplicate_read"]
    assert [r["kind"] for r in of(evs, "StepRejected")] == ["top"]
    assert sum(1 for i in of(evs, "StepInvoked") if i["executor"] == "find_files") == 2  # the opening read and the first


def test_words_again_after_the_reminder_fail_the_turn_as_not_done(home: Path, capsys, monkeypatch) -> None:
    (home / "Documents").mkdir()
    (home / "Documents" / "atlas.pdf").write_bytes(b"%PDF")
    script = [text("The largest PDF is atlas.pdf."), text("The largest PDF is atlas.pdf.")]
    code, out, llm = run(monkeypatch, capsys, script, "Find the largest PDF in ~/Documents and send its name to marco.", "--yes")
    assert code == 1 and out["failure"]["kind"] == "action_not_taken" and "send_messages" in out["failure"]["message"], out
    assert len(llm.requests) == 2


def test_nothing_to_act_on_is_an_answer_without_a_reminder(home: Path, capsys, monkeypatch) -> None:
    (home / "Downloads").mkdir()
    (home / "Downloads" / "keep.txt").write_text("k")
    script = [call("find_files", {"base_path": "~/Downloads", "pattern": "*.tmp"}), text("There are no .tmp files in ~/Downloads.")]
    code, out, llm = run(monkeypatch, capsys, script, "Delete the .tmp files in ~/Downloads.", "--yes")
    assert code == 0 and out["answer"] == "There are no .tmp files in ~/Downloads.", out
    assert len(llm.requests) == 2 and (home / "Downloads" / "keep.txt").exists()


def test_an_empty_slice_does_not_excuse_an_append(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B, asked to add coffee to a list, sliced the items of a text that had none: an
    empty list is nothing to act on only for an action that takes what was found (a delete)."""
    (home / "notes").mkdir()
    (home / "notes" / "shopping.md").write_text("- lentils\n- oat flakes\n")
    request = "Add coffee to the end of my shopping list ~/notes/shopping.md."
    sliced = call("extract_lines", {"content": "lentils", "first": 1, "items": True})
    code, out, llm = run(monkeypatch, capsys, [sliced, text("Done."), text("Done.")], request, "--yes")
    assert tool_messages(llm.requests[1])[-1]["entries"] == []
    assert code == 1 and out["failure"]["kind"] == "action_not_taken" and "write_files" in out["failure"]["message"], out
    assert [r["reason"] for r in of(events(capsys, out["turn_id"]), "AnswerRejected")] == ["action_not_taken"]
    assert (home / "notes" / "shopping.md").read_text() == "- lentils\n- oat flakes\n"


def _instruction_said_back(recorded) -> Step:
    told = tool_messages(recorded)[-1]
    said = told.get("hint") or told["error"]
    return text(said[0].upper() + said[1:] + ".")


def test_the_runtimes_instruction_said_back_is_not_an_answer(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B read data it held again, was told where the data was and what to do with it, and
    answered with those words: `answered`. It is sent back once, and the data it held answers."""
    (home / "notes").mkdir()
    (home / "notes" / "plans.md").write_text("- paint the fence\n")
    request = "What does ~/notes/plans.md say?"
    read = call("read_files", {"paths": ["~/notes/plans.md"]})
    code, out, llm = run(monkeypatch, capsys, [read, _instruction_said_back, text("It says: paint the fence.")], request)
    assert "already have this data at step 1" in tool_messages(llm.requests[1])[-1]["error"]
    assert code == 0 and out["status"] == "answered" and "paint the fence" in out["answer"], out
    assert [r["reason"] for r in of(events(capsys, out["turn_id"]), "AnswerRejected")] == ["instructions_echoed"]
    assert replays_clean(capsys, out["turn_id"])

    code, out, llm = run(monkeypatch, capsys, [read, _instruction_said_back, _instruction_said_back], request)
    assert code == 0 and out["status"] == "answered" and "paint the fence" in out["answer"], out
    assert "step 1" not in out["answer"]


def test_a_bad_step_reference_is_told_which_steps_hold_a_list(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B passed "from_step": 0 for the list of the step before; told only the rule, it
    listed the folder again and sent the same 0."""
    (home / "Documents").mkdir()
    (home / "Documents" / "atlas.pdf").write_bytes(b"%PDF")
    script = [call("sort_entries", {"field": "size", "from_step": 0}), text("I could not sort them.")]
    code, out, llm = run(monkeypatch, capsys, script, "Which is the largest file in ~/Documents?")
    obs = tool_messages(llm.requests[1])[-1]
    assert obs["error_class"] == "bad_step_reference" and "the steps with a list: 1 (find_files)" in obs["hint"], obs


def test_a_fresh_read_refused_for_its_form_gets_its_correction_round_with_the_tools(home: Path, capsys, monkeypatch) -> None:
    """What the 1.5B did on "the total size in bytes of the files in ~/Music": holding the
    folder's listing, it called read_files with max_bytes 0; the refusal counted as a fresh
    read, and it was asked for words at once (it answered 8500 for 4000)."""
    (home / "Music").mkdir()
    for name, size in (("a.mp3", 1000), ("b.mp3", 2500), ("c.mp3", 500)):
        (home / "Music" / name).write_bytes(b"x" * size)
    script = [call("read_files", {"paths": ["~/Music/a.mp3"], "max_bytes": 0}),
              call("compute_entries", {"op": "sum", "field": "size", "from_step": 1}),
              text("The files in ~/Music take 4000 bytes.")]
    code, out, llm = run(monkeypatch, capsys, script, "What is the total size in bytes of the files in ~/Music?")
    assert code == 0 and "4000" in out["answer"], out
    assert llm.requests[1].body.get("tool_choice") != "none"
    assert replays_clean(capsys, out["turn_id"])


@pytest.mark.parametrize(("answer", "status"), [("1284", "answered"), ("The backup has 1300 files.", "failed")])
def test_after_a_read_refused_for_its_form_an_answer_stands_on_figures_from_the_data(home: Path, capsys, monkeypatch, answer: str, status: str) -> None:
    """What the 1.5B did on "how many files the backup has": a count piped from a step that
    does not exist was refused (it never ran), then it answered 1284, read from the status
    page: right, yet the turn said failed. A figure from nowhere still fails it."""
    (home / "status.txt").write_text("backup ok: 1284 files, 3.5 GB\n")
    script = [call("compute_entries", {"op": "count", "from_step": 5}), text(answer)]
    code, out, llm = run(monkeypatch, capsys, script, "Read ~/status.txt and tell me how many files the backup has.")
    assert out["status"] == status, out
    evs = events(capsys, out["turn_id"])
    assert [r["kind"] for r in of(evs, "StepRejected")] and len(of(evs, "StepInvoked")) == 1  # the read only
    assert replays_clean(capsys, out["turn_id"])


def test_a_rejected_step_gets_its_reason_and_a_hint(home: Path, capsys, monkeypatch) -> None:
    script = [call("read_files", {"paths": ["~/a.md"], "bogus": 1}), text("I could not read it.")]
    code, out, llm = run(monkeypatch, capsys, script, "read ~/a.md")
    obs = tool_messages(llm.requests[1])[0]
    assert obs["error_class"] == "schema_violation" and obs["errors"] and "read_files again" in obs["hint"]
    assert code == 1 and out["status"] == "failed", out


def test_csv_read_then_compute_entries_sums_a_column(home: Path, capsys, monkeypatch) -> None:
    (home / "receipts").mkdir()
    (home / "receipts" / "groceries.csv").write_text("item,amount\nbread,2.50\nmilk,1.20\napples,3.30\n")
    script = [
        call("read_files", {"paths": ["~/receipts/groceries.csv"]}),
        call("compute_entries", {"from_step": 1, "op": "sum", "field": "amount"}),
        text("The total is 7.0."),
    ]
    code, out, llm = run(monkeypatch, capsys, script, "what is the total of the amount column in ~/receipts/groceries.csv")
    assert code == 0, out
    assert tool_messages(llm.requests[2])[-1]["content"] == pytest.approx(7.0)
    evs = events(capsys, out["turn_id"])
    resolved = of(evs, "StepResolved")[1]
    assert resolved["pipings"][0]["records"] == "csv" and resolved["args"]["entries"][0] == {"item": "bread", "amount": 2.5}


def test_a_missing_data_source_is_remediated_with_the_named_file(home: Path, capsys, monkeypatch) -> None:
    # The model makes the first read itself here (no opening read): this test is about what follows it.
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    (home / "receipts").mkdir()
    (home / "receipts" / "groceries.csv").write_text("item,amount\nbread,2\nmilk,3\n")
    script = [call("compute_entries", {"op": "sum", "field": "amount"}), text("The total is 5.")]
    code, out, llm = run(monkeypatch, capsys, script, "sum the amount column of ~/receipts/groceries.csv")
    assert code == 0 and out["answer"] == "The total is 5.", out
    obs = tool_messages(llm.requests[1])[0]
    assert obs["content"] == 5 and obs["remediated"] == {"prerequisite": {"executor": "read_files", "step": 2}, "retried_as_step": 3}
    evs = events(capsys, out["turn_id"])
    proposed = [(p["step"], p["executor"], p["call_form"]) for p in of(evs, "StepProposed")]
    assert proposed == [(1, "compute_entries", "native"), (2, "read_files", "remediation"), (3, "compute_entries", "remediation")]
    assert [(d["src_executor"], d["dst_executor"]) for d in of(evs, "DataPiped")] == [("read_files", "compute_entries")]
    assert replays_clean(capsys, out["turn_id"])


# Item 3: the right tools on the shortlist ---------------------------------------

def test_the_model_is_offered_the_source_and_not_the_side_effects(home: Path, capsys, monkeypatch) -> None:
    (home / "receipts").mkdir()
    (home / "receipts" / "groceries.csv").write_text("item,amount\nbread,2\n")
    _, out, llm = run(monkeypatch, capsys, [text("2")], "what is the total of the amount column in ~/receipts/groceries.csv")
    offered = llm.requests[0].tool_names
    assert {"read_files", "compute_entries"} <= set(offered), offered
    assert not {"delete_files", "move_files", "write_files", "send_messages"} & set(offered), offered
    _, _, llm = run(monkeypatch, capsys, [text("none")], "find the markdown files in ~/docs and tell me how many there are")
    offered = llm.requests[0].tool_names
    assert "find_files" in offered and not {"delete_files", "move_files", "write_files", "send_messages"} & set(offered), offered
    _, _, llm = run(monkeypatch, capsys, [text("ok")], "delete the .tmp files in ~/scratch")
    assert {"find_files", "delete_files"} <= set(llm.requests[0].tool_names)


def test_the_seed_manifests_with_phrases_still_sign_and_load(home: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["executors", "list", "--json"]) == 0
    rows = orjson.loads(capsys.readouterr().out)
    assert sum(1 for r in rows if r["state"] == "active") == 23, rows


def test_a_move_takes_only_the_kind_of_file_the_request_names(home: Path, capsys, monkeypatch) -> None:
    """Asked to move a folder's .txt files, the 1.5B moved its .md file too and answered that it had
    moved the .txt files; later it gave the files and their folder. What is not of the kind is taken
    out of the call, and a call with nothing of the kind left is refused before it runs."""
    (home / "notes" / "archive").mkdir(parents=True)
    (home / "notes" / "old").mkdir()
    for name in ("a.txt", "b.txt", "keep.md"):
        (home / "notes" / "archive" / name).write_text(name)
    only_md = call("move_files", {"paths": ["~/notes/archive/keep.md"], "dest_dir": "~/notes/old"})
    with_folder = call("move_files", {"moves": [{"src": "~/notes/archive/a.txt", "dst": "~/notes/old/a.txt"},
                                                {"src": "~/notes/archive/b.txt", "dst": "~/notes/old/b.txt"}],
                                      "paths": ["~/notes/archive", "~/notes/archive/keep.md"], "dest_dir": "~/notes/old"})
    code, out, llm = run(monkeypatch, capsys, [only_md, with_folder, text("Moved a.txt and b.txt into ~/notes/old.")],
                         "Move every .txt file in ~/notes/archive into ~/notes/old.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert (home / "notes" / "archive" / "keep.md").exists()
    assert sorted(p.name for p in (home / "notes" / "old").iterdir()) == ["a.txt", "b.txt"]
    evs = events(capsys, out["turn_id"])
    refused = of(evs, "StepRejected")
    assert [r["kind"] for r in refused] == ["kind"] and refused[0]["error"]["outside"] == ["~/notes/archive/keep.md"]
    told = tool_messages(llm.requests[1])[-1]
    assert told["error_class"] == "outside_request" and "keep.md" in told["error"], told
    narrowed = of(evs, "StepResolved")[-1]
    assert narrowed["completed"]["outside_kind"] == ["~/notes/archive", "~/notes/archive/keep.md"]
    assert "paths" not in narrowed["args"] and len(narrowed["args"]["moves"]) == 2
    assert replays_clean(capsys, out["turn_id"])


def test_a_move_takes_only_the_files_whose_names_the_request_names(home: Path, capsys, monkeypatch) -> None:
    """Asked to move the files whose name starts with a text, the 1.5B listed the folder, moved every
    file in it, one that does not start so among them, and answered that it had moved what was asked.
    The others are taken out of the call; a call with none left is refused before it runs; under the
    setting off (turns recorded before it), the call runs as it was given."""
    (home / "scans").mkdir()
    (home / "old").mkdir()
    for name in ("draft_a.txt", "Draft_b.txt", "final.txt"):
        (home / "scans" / name).write_text(name)
    only_final = call("move_files", {"paths": ["~/scans/final.txt"], "dest_dir": "~/old"})
    everything = call("move_files", {"moves": [{"src": f"~/scans/{n}", "dst": f"~/old/{n}"} for n in ("draft_a.txt", "Draft_b.txt", "final.txt")],
                                     "paths": ["~/scans"], "dest_dir": "~/old"})
    request = "Move the files in ~/scans whose name starts with draft_ into ~/old."
    code, out, llm = run(monkeypatch, capsys, [only_final, everything, text("Moved the drafts into ~/old.")], request, "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert sorted(p.name for p in (home / "old").iterdir()) == ["Draft_b.txt", "draft_a.txt"]
    assert (home / "scans" / "final.txt").exists()
    evs = events(capsys, out["turn_id"])
    refused = of(evs, "StepRejected")
    assert [r["kind"] for r in refused] == ["names"] and refused[0]["error"]["outside"] == ["~/scans/final.txt"], refused
    told = tool_messages(llm.requests[1])[-1]
    assert told["error_class"] == "outside_request" and "starts with draft_" in told["error"], told
    narrowed = of(evs, "StepResolved")[-1]
    assert narrowed["completed"]["outside_name"] == ["~/scans", "~/scans/final.txt"], narrowed
    assert "paths" not in narrowed["args"] and len(narrowed["args"]["moves"]) == 2
    assert replays_clean(capsys, out["turn_id"])

    for name in ("draft_a.txt", "Draft_b.txt"):
        (home / "old" / name).rename(home / "scans" / name)
    all_three = call("move_files", {"moves": [{"src": f"~/scans/{n}", "dst": f"~/old/{n}"} for n in ("draft_a.txt", "Draft_b.txt", "final.txt")]})
    code, out, _ = run(monkeypatch, capsys, [all_three, text("Moved them.")], request, "--yes", "--set", "name_conditions=false")
    assert (code, out["status"]) == (0, "answered"), out
    assert sorted(p.name for p in (home / "old").iterdir()) == ["Draft_b.txt", "draft_a.txt", "final.txt"]


def test_a_delete_of_the_largest_takes_the_top_of_a_sort(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B listed ~/Downloads and deleted a.zip, "the largest", leaving the larger movie.mkv:
    a delete of the largest without a sort, or of a file outside the sort's top, never runs."""
    (home / "Downloads").mkdir()
    (home / "Downloads" / "a.zip").write_bytes(b"a" * 50)
    (home / "Downloads" / "movie.mkv").write_bytes(b"m" * 500)
    (home / "Downloads" / "b.txt").write_bytes(b"b" * 5)
    script = [call("find_files", {"base_path": "~/Downloads"}),
              call("delete_files", {"paths": ["~/Downloads/a.zip"]}),
              call("sort_entries", {"from_step": 1, "field": "size", "order": "desc"}),
              call("delete_files", {"paths": ["~/Downloads/b.txt"]}),
              call("delete_files", {"paths": ["~/Downloads/movie.mkv"]}),
              text("Deleted movie.mkv, the largest file in ~/Downloads.")]
    code, out, llm = run(monkeypatch, capsys, script, "Find the largest file in ~/Downloads and delete it.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert (home / "Downloads" / "a.zip").exists() and (home / "Downloads" / "b.txt").exists()
    assert not (home / "Downloads" / "movie.mkv").exists()
    refused = of(events(capsys, out["turn_id"]), "StepRejected")
    assert [r["kind"] for r in refused] == ["top", "top"], refused
    assert "no step sorted" in refused[0]["error"]["message"] and "is not among it" in refused[1]["error"]["message"]
    assert replays_clean(capsys, out["turn_id"])


def test_a_delete_refused_before_its_sort_is_judged_again_once_the_sort_ran(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B proposed deleting the right file before sorting, was refused for want of a sort, sorted, and
    proposed the same delete: it was barred as a repeated failure, and the turn failed with the sort in hand.
    Refused for a step not yet taken, the call is judged again once a step has worked since; proposed again
    with nothing new, it is still barred."""
    (home / "Downloads").mkdir()
    (home / "Downloads" / "a.zip").write_bytes(b"a" * 50)
    (home / "Downloads" / "movie.mkv").write_bytes(b"m" * 500)
    delete = call("delete_files", {"paths": ["~/Downloads/movie.mkv"]})
    script = [call("find_files", {"base_path": "~/Downloads"}), delete,
              call("sort_entries", {"from_step": 1, "field": "size", "order": "desc"}), delete,
              text("Deleted movie.mkv, the largest file in ~/Downloads.")]
    code, out, llm = run(monkeypatch, capsys, script, "Find the largest file in ~/Downloads and delete it.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert not (home / "Downloads" / "movie.mkv").exists() and (home / "Downloads" / "a.zip").exists()
    evs = events(capsys, out["turn_id"])
    assert [r["kind"] for r in of(evs, "StepRejected")] == ["top"]
    assert "repeated_failure" not in [d["decision"]["outcome"] for d in of(evs, "StepIntercepted")]
    assert replays_clean(capsys, out["turn_id"])

    (home / "Downloads" / "movie.mkv").write_bytes(b"m" * 500)
    again = [call("find_files", {"base_path": "~/Downloads"}), delete, delete, text("Deleted movie.mkv.")]
    code, out, llm = run(monkeypatch, capsys, again, "Find the largest file in ~/Downloads and delete it.", "--yes")
    assert out["status"] != "answered" and (home / "Downloads" / "movie.mkv").exists(), out
    evs = events(capsys, out["turn_id"])
    assert "repeated_failure" in [d["decision"]["outcome"] for d in of(evs, "StepIntercepted")], of(evs, "StepIntercepted")


def test_a_delete_of_the_largest_needs_the_whole_list_sorted(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B, after the opening list of ~/Downloads, listed it again with max_results 1 (the
    first file found, a.zip), sorted that list of one, and proposed deleting a.zip as the largest:
    a sort of fewer files than were found cannot show which is the largest."""
    (home / "Downloads").mkdir()
    (home / "Downloads" / "a.zip").write_bytes(b"a" * 50)
    (home / "Downloads" / "movie.mkv").write_bytes(b"m" * 500)
    (home / "Downloads" / "b.txt").write_bytes(b"b" * 5)
    script = [call("find_files", {"base_path": "~/Downloads", "max_results": 1}),
              call("sort_entries", {"from_step": 2, "field": "size", "order": "desc"}),
              call("delete_files", {"paths": ["~/Downloads/a.zip"]}),
              call("sort_entries", {"from_step": 1, "field": "size", "order": "desc"}),
              call("delete_files", {"paths": ["~/Downloads/movie.mkv"]}),
              text("Deleted movie.mkv, the largest file in ~/Downloads.")]
    code, out, llm = run(monkeypatch, capsys, script, "Find the largest file in ~/Downloads and delete it.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert (home / "Downloads" / "a.zip").exists() and (home / "Downloads" / "b.txt").exists()
    assert not (home / "Downloads" / "movie.mkv").exists()
    refused = of(events(capsys, out["turn_id"]), "StepRejected")
    assert [r["kind"] for r in refused] == ["top"], refused
    assert "ordered 1 of the 3 files step 1 found" in refused[0]["error"]["message"], refused[0]
    assert replays_clean(capsys, out["turn_id"])


def test_a_delete_of_the_largest_from_a_list_cut_short_is_refused(home: Path, capsys, monkeypatch) -> None:
    """find_files with max_results 1 gives the first file found: no list of the folder is whole."""
    (home / "Downloads").mkdir()
    (home / "Downloads" / "a.zip").write_bytes(b"a" * 50)
    (home / "Downloads" / "movie.mkv").write_bytes(b"m" * 500)
    script = [call("find_files", {"base_path": "~/Downloads", "max_results": 1}),
              call("delete_files", {"paths": ["~/Downloads/a.zip"]}),
              call("find_files", {"base_path": "~/Downloads", "pattern": "*"}),
              call("sort_entries", {"from_step": 3, "field": "size", "order": "desc"}),
              call("delete_files", {"paths": ["~/Downloads/movie.mkv"]}),
              text("Deleted movie.mkv, the largest file in my downloads.")]
    code, out, llm = run(monkeypatch, capsys, script, "Delete the largest file of my downloads folder.", "--yes")
    refused = of(events(capsys, out["turn_id"]), "StepRejected")
    assert refused and refused[0]["kind"] == "top" and "cut short" in refused[0]["error"]["message"], refused
    assert (home / "Downloads" / "a.zip").exists()
    assert replays_clean(capsys, out["turn_id"])


def test_a_model_that_reads_again_instead_of_acting_is_told_to_act(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B read the diary, then proposed the same read twice more instead of write_files; told
    the second time to answer from the data, it answered in words and nothing was written."""
    (home / "journal").mkdir()
    (home / "journal" / "march.txt").write_text("first day\nsecond day\nlast day\n")
    # Step 1 is Metnos's own opening read of the file the request names; the model then reads it twice.
    script = [call("read_files", {"paths": ["~/journal/march.txt"]}),
              call("read_files", {"paths": ["~/journal/march.txt"]}),
              call("write_files", {"files": [{"path": "~/notes/today.md", "content": "first day\nsecond day\nlast day\n"}]}),
              text("I copied ~/journal/march.txt to ~/notes/today.md.")]
    code, out, llm = run(monkeypatch, capsys, script, "Read ~/journal/march.txt and write it to ~/notes/today.md.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert (home / "notes" / "today.md").read_text() == "first day\nsecond day\nlast day\n"
    told = [m for r in llm.requests for m in tool_messages(r) if m.get("error_class") == "duplicate_read"]
    assert told and all("call write_files now" in m["hint"] for m in told), told
    assert replays_clean(capsys, out["turn_id"])


def test_an_answer_that_names_none_of_what_was_found_is_answered_from_the_list(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B listed ~/notes and answered "The markdown files in ~/notes were found.", and the
    turn said answered: an answer naming none of the items is sent back, then the list answers."""
    (home / "notes").mkdir()
    for name in ("alpha.md", "beta.md"):
        (home / "notes" / name).write_text("x")
    empty = text("The markdown files in ~/notes were found.")
    code, out, llm = run(monkeypatch, capsys, [empty, empty], "List the markdown files in ~/notes.")
    assert (code, out["status"]) == (0, "answered"), out
    assert "alpha.md" in out["answer"] and "beta.md" in out["answer"], out["answer"]
    told = [m for m in llm.requests[1].body["messages"] if m["role"] == "user"][-1]["content"]
    assert "named none of the items" in told, told
    assert replays_clean(capsys, out["turn_id"])


def test_an_answer_that_says_it_could_not_be_done_is_not_answered(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B read the CSV, answered "The total ... could not be done", and the turn said answered."""
    (home / "receipts").mkdir()
    (home / "receipts" / "groceries.csv").write_text("item,amount\nbread,2.50\nmilk,1.20\n")
    script = [call("read_files", {"paths": ["~/receipts/groceries.csv"]}),
              text("The total of the amount column could not be done because the data is already at an earlier step.")]
    code, out, llm = run(monkeypatch, capsys, script, "What is the total of the amount column in ~/receipts/groceries.csv?")
    assert (code, out["status"], out["failure"]["kind"]) == (1, "failed", "said_not_done"), out
    assert out["failure"]["message"].startswith("Not done, as the language model itself said: The total of the amount column could not")
    assert not of(events(capsys, out["turn_id"]), "TurnAnswered")
    assert replays_clean(capsys, out["turn_id"])


def test_a_request_for_every_friday_is_scheduled_not_done_now(home: Path, capsys, monkeypatch) -> None:
    """Asked to send a note's first line every Friday at 17:00, the 1.5B sent it once, now, and
    answered that it had: the send is refused before it runs, the schedule is what answers."""
    (home / "notes").mkdir()
    (home / "notes" / "meeting.md").write_text("Review moved to room B12.\nBring the budget.\n")
    send_now = call("send_messages", {"messages": [{"to_user": "me", "body": "Review moved to room B12."}]})
    schedule = call("schedule_recurring", {"executor": "read_files", "args": {"paths": ["~/notes/meeting.md"]}, "cron": "0 17 * * 5"})
    code, out, llm = run(monkeypatch, capsys, [send_now, schedule, text("Scheduled for every Friday at 17:00.")],
                         "Every Friday at 17:00 send me the first line of ~/notes/meeting.md.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert not (home / "outbox").exists() or not any((home / "outbox").rglob("*.json"))
    evs = events(capsys, out["turn_id"])
    refused = of(evs, "StepRejected")
    assert [r["kind"] for r in refused] == ["recurrence"] and "every friday" in refused[0]["error"]["when"].casefold()
    assert replays_clean(capsys, out["turn_id"])


def test_an_answer_with_no_schedule_for_a_recurring_request_is_not_done(home: Path, capsys, monkeypatch) -> None:
    script = [text("Done: I will remind you every Monday."), text("Done: I will remind you every Monday.")]
    code, out, llm = run(monkeypatch, capsys, script, "Every Monday at 9:00 remind me to water the plants.", "--yes")
    assert (code, out["failure"]["kind"]) == (1, "action_not_taken") and "schedule_recurring" in out["failure"]["message"], out


@pytest.mark.parametrize("body", ["Review moved to room 4.", "The first line of your notes is: Review moved to room 4."])
def test_a_schedule_that_carries_a_line_read_today_is_refused_and_a_chain_that_reads_each_time_is_made(
        home: Path, capsys, monkeypatch, body: str) -> None:
    # The 1.5B scheduled "the first line of the notes" as the line it read today, to be sent every Friday;
    # then, at another time, that line inside words of its own (schedule_carries_reads).
    (home / "m.md").write_text("Review moved to room 4.\nBring the sheet.\n")
    request = "Every Friday at 17:00 send me the first line of ~/m.md."
    baked = {"executor": "send_messages", "cron": "0 17 * * 5",
             "args": {"messages": [{"to_user": "me", "body": body}]}}
    chain = {"cron": "0 17 * * 5", "chain": [{"executor": "read_files", "args": {"paths": ["~/m.md"]}},
                                             {"executor": "send_messages", "args": {"messages": [{"to_user": "me", "body": "{{step1.content}}"}]}}]}
    script = [call("read_files", {"paths": ["~/m.md"]}), call("schedule_recurring", baked), call("schedule_recurring", chain),
              text("Scheduled for every Friday at 17:00.")]
    code, out, llm = run(monkeypatch, capsys, script, request, "--yes")
    evs = events(capsys, out["turn_id"])
    [rejected] = [r for r in of(evs, "StepRejected") if r["kind"] == "recurrence"]
    assert rejected["error"]["argument"] == "args.messages.0.body" and rejected["error"]["origin"]["from"] == "step", rejected
    assert '"chain"' in tool_messages(llm.requests[2])[-1]["hint"]
    made = [b for b in of(evs, "BuiltinCalled") if b["name"] == "schedule_recurring"]
    assert len(made) == 1 and made[0]["observation"]["ok"] is True, made
    assert code == 0 and out["status"] == "answered", out
    assert replays_clean(capsys, out["turn_id"])


@pytest.mark.parametrize("reads_named", [True, False])
def test_a_schedule_that_never_reads_the_file_the_request_names_is_refused(home: Path, capsys, monkeypatch, reads_named: bool) -> None:
    """The 1.5B, asked for a note's first line every Friday, scheduled a message of its own words
    ("Quarterly Review Reminder") that never reads the note, and the turn said `answered`."""
    (home / "m.md").write_text("Review moved to room 4.\nBring the sheet.\n")
    request = "Every Friday at 17:00 send me the first line of ~/m.md."
    own_words = {"executor": "send_messages", "cron": "0 17 * * 5",
                 "args": {"messages": [{"to_user": "me", "subject": "Weekly reminder", "body": "Weekly reminder"}]}}
    chain = {"cron": "0 17 * * 5", "chain": [{"executor": "read_files", "args": {"paths": ["~/m.md"]}},
                                             {"executor": "send_messages", "args": {"messages": [{"to_user": "me", "body": "{{step1.content}}"}]}}]}
    script = [call("schedule_recurring", own_words), call("schedule_recurring", chain), text("Scheduled for every Friday at 17:00.")]
    settings = () if reads_named else ("--set", "schedule_reads_named_sources=false")
    code, out, llm = run(monkeypatch, capsys, script, request, "--yes", *settings)
    evs = events(capsys, out["turn_id"])
    made = [b["observation"] for b in of(evs, "BuiltinCalled") if b["name"] == "schedule_recurring"]
    if not reads_named:  # as turns recorded before the check ran: the schedule of its own words is made
        assert len(made) == 1 and not of(evs, "StepRejected"), (made, out)
        return
    [rejected] = [r for r in of(evs, "StepRejected") if r["kind"] == "recurrence"]
    assert rejected["error"]["source"] == "~/m.md", rejected
    hint = tool_messages(llm.requests[1])[-1]["hint"]
    assert '"chain"' in hint and "read_files of ~/m.md" in hint, hint
    assert len(made) == 1 and made[0]["ok"] is True, made
    assert code == 0 and out["status"] == "answered", out
    assert replays_clean(capsys, out["turn_id"])


@pytest.mark.parametrize("repeat_as_proposed", [True, False])
def test_a_refused_schedule_a_rule_trimmed_is_known_again_when_proposed_again(
        home: Path, capsys, monkeypatch, repeat_as_proposed: bool) -> None:
    # The 0.5B sent one refused schedule (an end nobody asked for, trimmed by a rule, and today's line in it)
    # twelve times, to the step cap: the trimmed call's key was not the proposal's, so no repeat was seen.
    (home / "m.md").write_text("Review moved to room 4.\nBring the sheet.\n")
    baked = call("schedule_recurring", {"executor": "send_messages", "cron": "0 17 * * 5", "count": 1, "expiry": "2023-10-01T17:00:00Z",
                                        "args": {"messages": [{"to_user": "me", "body": "Review moved to room 4.\nBring the sheet.\n"}]}})
    script = [call("read_files", {"paths": ["~/m.md"]}), baked, baked, baked, text("I could not schedule it.")]
    settings = () if repeat_as_proposed else ("--set", "repeat_as_proposed=false")
    code, out, llm = run(monkeypatch, capsys, script, "Every Friday at 17:00 send me the first line of ~/m.md.", "--yes", *settings)
    evs = events(capsys, out["turn_id"])
    rejected = [r["step"] for r in of(evs, "StepRejected") if r["kind"] == "recurrence"]
    repeats = [i["step"] for i in of(evs, "StepIntercepted") if i["decision"]["outcome"] == "repeated_failure"]
    if repeat_as_proposed:
        assert (rejected, repeats) == ([3], [4, 5]), (rejected, repeats)  # step 1 the opening read, 2 its duplicate
    else:
        assert (rejected, repeats) == ([3, 4, 5], []), (rejected, repeats)
    assert code != 0 and out["status"] != "answered", out


def test_the_very_same_action_again_is_not_done_twice(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B made the same weekly reminder ten times in one turn, each run a new schedule, and sent
    the same append twice: the second identical call of an action is not run, and the turn is asked
    for its answer."""
    (home / "notes").mkdir()
    shopping = home / "notes" / "shopping.md"
    shopping.write_text("- lentils\n")
    coffee = call("write_files", {"files": [{"path": "~/notes/shopping.md", "content": "- coffee\n", "mode": "append"}]})
    script = [coffee, coffee, text("Coffee is now at the end of your shopping list.")]
    code, out, llm = run(monkeypatch, capsys, script, "Add coffee to the end of my shopping list ~/notes/shopping.md.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert shopping.read_text() == "- lentils\n- coffee\n"
    evs = events(capsys, out["turn_id"])
    [intercepted] = of(evs, "StepIntercepted")
    assert intercepted["decision"]["outcome"] == "repeated_action" and intercepted["decision"]["previous_steps"] == [2], intercepted
    # Asked for words after the repeat: the last round offered no tool.
    assert llm.requests[-1].body.get("tool_choice") == "none" or not llm.requests[-1].body.get("tools"), llm.requests[-1].body
    # Told as done, at the step that did it: told it failed, the 1.5B answered that it could not be done.
    told = tool_messages(llm.requests[-1])[-1]
    assert (told["ok"], told["done_at_step"], "error_class" in told) == (True, 2, False), told
    assert replays_clean(capsys, out["turn_id"])


def test_an_action_done_repeated_and_then_said_not_done_is_answered_with_what_it_did(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B deleted the Wednesday meeting, proposed the same delete again, was told it was done, and answered
    that the steps could not be done: the turn said failed with the event gone. It is answered with what the
    delete reported; so is a "could not" with no repeat when every step went through (done_not_denied_once);
    with that setting off, or after a step that went wrong, it still fails."""
    (home / "notes").mkdir()
    shopping = home / "notes" / "shopping.md"
    shopping.write_text("- lentils\n")
    coffee = call("write_files", {"files": [{"path": "~/notes/shopping.md", "content": "- coffee\n", "mode": "append"}]})
    request = "Add coffee to the end of my shopping list ~/notes/shopping.md."
    script = [coffee, coffee, text("The user could not do the following steps: write_files.")]
    code, out, llm = run(monkeypatch, capsys, script, request, "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert shopping.read_text() == "- lentils\n- coffee\n"
    assert "shopping.md" in out["answer"] and "could not" not in out["answer"], out["answer"]
    evs = events(capsys, out["turn_id"])
    assert [c["reason"] for c in of(evs, "AnswerComposed")] == ["done_said_not_done"]
    assert replays_clean(capsys, out["turn_id"])

    shopping.write_text("- lentils\n")
    denied = text("The user could not do the following steps: write_files.")
    code, out, _ = run(monkeypatch, capsys, [coffee, denied], request, "--yes")
    assert (code, out["status"]) == (0, "answered") and shopping.read_text() == "- lentils\n- coffee\n", out
    assert [c["reason"] for c in of(events(capsys, out["turn_id"]), "AnswerComposed")] == ["done_said_not_done"]
    assert replays_clean(capsys, out["turn_id"])
    shopping.write_text("- lentils\n")
    code, out, _ = run(monkeypatch, capsys, [coffee, denied], request, "--yes", "--set", "done_not_denied_once=false")
    assert out["status"] == "failed" and out["failure"]["kind"] == "said_not_done", out
    shopping.write_text("- lentils\n")
    missing = call("read_files", {"paths": ["~/notes/pantry.md"]})
    code, out, _ = run(monkeypatch, capsys, [missing, coffee, denied], request, "--yes")
    assert out["status"] == "failed" and out["failure"]["kind"] in ("said_not_done", "step_failed"), out


def test_a_reminder_made_and_then_said_not_done_is_answered_with_its_schedule(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B made the weekly reminder asked for, then said "The step did not produce any data that could not be
    done": the turn said failed with the schedule made."""
    reminder = call("schedule_recurring", {"executor": "get_now", "args": {}, "cron": "0 9 * * 1", "label": "Water plants"})
    denied = text("The actual values from the steps produced are:\n- ok: true\n\nThe step did not produce any data that could not be done.")
    code, out, _ = run(monkeypatch, capsys, [reminder, denied], "Every Monday at 9:00 remind me to water the plants.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    evs = events(capsys, out["turn_id"])
    [made] = [o["observation"] for o in of(evs, "ObservationRecorded")]
    assert "could not" not in out["answer"] and made["next_fire"] in out["answer"], out["answer"]
    assert [c["reason"] for c in of(evs, "AnswerComposed")] == ["done_said_not_done"]
    assert replays_clean(capsys, out["turn_id"])


def test_an_append_that_writes_the_list_again_appends_only_what_is_new(home: Path, capsys, monkeypatch) -> None:
    """Asked to add coffee to a list, the 1.5B appended the whole list with coffee at its end."""
    (home / "notes").mkdir()
    shopping = home / "notes" / "shopping.md"
    shopping.write_text("- lentils\n- oat flakes\n")
    whole = call("write_files", {"files": [{"path": "~/notes/shopping.md", "content": "- lentils\n- oat flakes\n- coffee\n", "mode": "append"}]})
    code, out, _ = run(monkeypatch, capsys, [whole, text("Coffee is now at the end of your shopping list.")],
                       "Add coffee to the end of my shopping list ~/notes/shopping.md.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert shopping.read_text() == "- lentils\n- oat flakes\n- coffee\n"
    [resolved] = [r for r in of(events(capsys, out["turn_id"]), "StepResolved") if "files" in r["args"]]
    assert resolved["completed"]["appended_only_new"] == ["~/notes/shopping.md"], resolved
    assert resolved["args"]["files"][0]["content"] == "- coffee\n", resolved
    assert replays_clean(capsys, out["turn_id"])
    # An append of new lines only is left as it is.
    more = call("write_files", {"files": [{"path": "~/notes/shopping.md", "content": "- milk\n", "mode": "append"}]})
    code, out, _ = run(monkeypatch, capsys, [more, text("Milk is now at the end of your shopping list.")],
                       "Add milk to the end of my shopping list ~/notes/shopping.md.", "--yes")
    assert (code, out["status"]) == (0, "answered") and shopping.read_text().endswith("- coffee\n- milk\n"), out


def test_the_one_schedule_asked_for_made_the_turn_asks_for_words(home: Path, capsys, monkeypatch) -> None:
    """Its reminder made, the 1.5B went on to schedule a mail read nobody asked for."""
    reminder = call("schedule_recurring", {"executor": "get_now", "args": {}, "cron": "0 8 * * *", "label": "vitamins"})
    code, out, llm = run(monkeypatch, capsys, [reminder, text("Every day at 8:00 you will be reminded to take the vitamins.")],
                         "Every day at 8:00 remind me to take the vitamins.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    after = llm.requests[1].body
    assert after.get("tool_choice") == "none" or not after.get("tools"), after


def test_the_next_firing_a_schedule_returned_may_be_told(home: Path, capsys, monkeypatch) -> None:
    """What the schedule builtin returned is data an answer may give: told its next firing, the 1.5B's right answer ended unverified."""
    from datetime import datetime, timezone

    from croniter import croniter

    first = croniter("0 8 1 1 *", datetime.now(timezone.utc)).get_next(datetime)
    reminder = call("schedule_recurring", {"executor": "get_now", "args": {}, "cron": "0 8 1 1 *", "label": "insurance"})
    said = f"Done: the reminder first fires on {first:%Y-%m-%d}."
    code, out, _ = run(monkeypatch, capsys, [reminder, text(said)],
                       "Every first of January at 8:00 remind me to renew the insurance.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert replays_clean(capsys, out["turn_id"])


def test_a_schedule_stops_only_where_the_request_says(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B gave "every Monday at 9" an expiry in the year 1000 and a count nobody asked for."""
    reminder = call("schedule_recurring", {"executor": "get_now", "args": {}, "cron": "0 9 * * 1", "label": "plants",
                                           "expiry": "1000-01-01T00:00:00Z", "count": 10})
    code, out, _ = run(monkeypatch, capsys, [reminder, text("Every Monday at 9:00 you will be reminded to water the plants.")],
                       "Every Monday at 9:00 remind me to water the plants.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    resolved = of(events(capsys, out["turn_id"]), "StepResolved")
    assert [r["completed"] for r in resolved] == [{"unasked": ["expiry", "count"]}], resolved
    capsys.readouterr()
    assert main(["schedule", "list", "--json"]) == 0
    made = orjson.loads(capsys.readouterr().out)
    assert [(s["cron"], s["count"], s["expiry"]) for s in made] == [("0 9 * * 1", None, None)], made
    assert replays_clean(capsys, out["turn_id"])


def test_a_schedule_keeps_the_end_the_request_gives(home: Path, capsys, monkeypatch) -> None:
    reminder = call("schedule_recurring", {"executor": "get_now", "args": {}, "cron": "0 9 * * 1", "label": "plants", "count": 4})
    code, out, _ = run(monkeypatch, capsys, [reminder, text("Every Monday at 9:00, four times, you will be reminded.")],
                       "Every Monday at 9:00 remind me to water the plants, 4 times.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    capsys.readouterr()
    assert main(["schedule", "list", "--json"]) == 0
    assert [s.get("count") for s in orjson.loads(capsys.readouterr().out)] == [4]


def test_an_answer_may_say_what_the_turn_told_of_an_action_not_done_twice(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B's right answer after a repeated action restated the runtime's note on it (its
    done_at_step), found in no executor's result: it ended unverified."""
    (home / "notes").mkdir()
    shopping = home / "notes" / "shopping.md"
    shopping.write_text("- lentils\n")
    coffee = call("write_files", {"files": [{"path": "~/notes/shopping.md", "content": "- coffee\n", "mode": "append"}]})
    said = "Coffee is at the end of your list (done_at_step: 2); the second call was not run."
    code, out, _ = run(monkeypatch, capsys, [coffee, coffee, text(said)],
                       "Add coffee to the end of my shopping list ~/notes/shopping.md.", "--yes")
    assert (code, out["status"]) == (0, "answered"), out
    assert replays_clean(capsys, out["turn_id"])


def test_words_after_a_loop_that_name_nothing_found_are_not_answered(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B, asked what changed in a git repository, listed the folder, filtered the list three times,
    was stopped for repeating itself, and answered "The last commit ... did not change any files." with no
    step that asked git: answered, and wrong. Words that name nothing the steps found, after a loop, are not
    answered; words that name what a step found are; and under the setting off the turn said answered."""
    plants = home / "code" / "plants"
    plants.mkdir(parents=True)
    for name in ("roses.txt", "tulips.md"):
        (plants / name).write_text("spring\n")
    listing = call("find_files", {"base_path": "~/code/plants"})
    nothing = text("Nothing in ~/code/plants is different since the last commit.")
    request = "what is different in the git repo ~/code/plants since my last commit?"
    code, out, llm = run(monkeypatch, capsys, [listing, listing, nothing, nothing], request)
    assert out["status"] == "unverified", out
    evs = events(capsys, out["turn_id"])
    assert [d["decision"]["outcome"] for d in of(evs, "StepIntercepted")] == ["duplicate_read", "duplicate_read_repeated"]
    assert [u.get("bare", "") != "" for u in of(evs, "AnswerUngrounded")] == [True, True], of(evs, "AnswerUngrounded")
    assert "repeating itself" in of(evs, "AnswerUngrounded")[0]["bare"]
    assert replays_clean(capsys, out["turn_id"])

    named = text("The repository holds tulips.md and roses.txt.")
    code, out, _ = run(monkeypatch, capsys, [listing, listing, named], request)
    assert out["status"] == "answered", out

    code, out, _ = run(monkeypatch, capsys, [listing, listing, nothing], request, "--set", "grounding_after_loop=false")
    assert out["status"] == "answered" and out["answer"] == "Nothing in ~/code/plants is different since the last commit.", out


def test_data_the_request_does_not_ask_for_is_not_made_its_answer(home: Path, capsys, monkeypatch) -> None:
    """The 0.5B, asked what changed in a git repository, listed the folder three times, and Metnos
    answered with the listing: `answered`, though nothing ran git. Data made into the answer after a
    loop comes from what the request's words rank first, or that ran; else the turn says why it could
    not answer. A listing asked for is still answered, and under the setting off the turn did as before."""
    plants = home / "code" / "plants"
    plants.mkdir(parents=True)
    for name in ("roses.txt", "tulips.md"):
        (plants / name).write_text("spring\n")
    listing = call("find_files", {"base_path": "~/code/plants"})
    request = "what is different in the git repo ~/code/plants since my last commit?"
    code, out, _ = run(monkeypatch, capsys, [listing] * 4, request)
    assert out["status"] == "failed" and code != 0, out
    assert "run_commands" in out["failure"]["message"] and "find_files" in out["failure"]["message"], out
    evs = events(capsys, out["turn_id"])
    assert not of(evs, "AnswerComposed") and not of(evs, "TurnAnswered")
    assert replays_clean(capsys, out["turn_id"])

    code, out, _ = run(monkeypatch, capsys, [listing] * 4, "list the files in ~/code/plants")
    assert out["status"] == "answered" and "roses.txt" in out["answer"] and "tulips.md" in out["answer"], out

    code, out, _ = run(monkeypatch, capsys, [listing] * 4, request, "--set", "data_asked_for=false")
    assert out["status"] == "answered" and "roses.txt" in out["answer"], out


def _drafts(home: Path) -> None:
    drafts = home / "drafts"
    drafts.mkdir()
    now = time.time()
    for name, days in (("a.md", 9), ("plans.md", 0.5), ("z.md", 30)):
        (drafts / name).write_text(name[0])
        os.utime(drafts / name, (now - days * 86400, now - days * 86400))


def test_the_newest_of_a_list_a_limit_cut_is_not_the_folders(home: Path, capsys, monkeypatch) -> None:
    """The 1.5B, asked which markdown file was modified most recently, listed the folder again with
    max_results 1 (one file of three, truncated), and Metnos worked the newest out of that one:
    `answered` with the wrong file. The top of a list a limit cut is not the whole's: it is worked out
    of the whole listing; and under the setting off the turn did as before."""
    _drafts(home)
    request = "Which markdown file in ~/drafts is the newest?"
    cut = call("find_files", {"base_path": "~/drafts", "pattern": "*.md", "max_results": 1})
    wrong = text("The newest is a.md.")
    code, out, llm = run(monkeypatch, capsys, [cut, wrong, wrong], request)
    assert tool_messages(llm.requests[1])[-1]["metadata"]["truncated"] is True
    assert code == 0 and out["status"] == "answered" and "plans.md" in out["answer"] and "a.md" not in out["answer"], out
    evs = events(capsys, out["turn_id"])
    sorted_from = [s["pipings"][0]["src_step"] for s in of(evs, "StepResolved") if s["pipings"]]
    assert sorted_from == [1], of(evs, "StepResolved")
    assert replays_clean(capsys, out["turn_id"])

    code, out, _ = run(monkeypatch, capsys, [cut, wrong, wrong], request, "--set", "grounding_whole_lists=false")
    assert out["status"] == "answered" and "a.md" in out["answer"], out


def test_a_ranking_of_a_cut_list_alone_is_not_answered(home: Path, capsys, monkeypatch) -> None:
    """When every list the turn holds was cut by a limit, the newest it ranks is not the folder's:
    the turn says so and names the step, never `answered`."""
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    _drafts(home)
    request = "Which markdown file in ~/drafts is the newest?"
    cut = call("find_files", {"base_path": "~/drafts", "pattern": "*.md", "max_results": 1})
    ranked = call("sort_entries", {"from_step": 1, "field": "modified", "order": "desc"})
    wrong = text("The newest is a.md.")
    code, out, _ = run(monkeypatch, capsys, [cut, ranked, wrong, wrong, wrong], request)
    assert code != 0 and out["status"] == "unverified", out
    assert "cut short" in out["failure"]["message"] and "sort_entries" in out["failure"]["message"], out
    assert replays_clean(capsys, out["turn_id"])

    code, out, _ = run(monkeypatch, capsys, [cut, ranked, wrong], request, "--set", "grounding_whole_lists=false")
    assert out["status"] == "answered" and "a.md" in out["answer"], out


def test_a_count_of_a_list_a_limit_cut_is_not_answered(home: Path, capsys, monkeypatch) -> None:
    """Asked how many markdown files a folder holds, a model that lists it with max_results 1 counts one
    of three: the count is sent back once, the model lists it whole and answers three, `answered`;
    when it counts the cut list again the turn is `unverified`, naming the cut listing, never `answered`;
    under the setting off the turn did as before."""
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    _drafts(home)
    request = "How many markdown files are in ~/drafts?"
    cut = call("find_files", {"base_path": "~/drafts", "pattern": "*.md", "max_results": 1})
    whole = call("find_files", {"base_path": "~/drafts", "pattern": "*.md"})
    one = text("There is 1 markdown file in ~/drafts.")
    code, out, llm = run(monkeypatch, capsys, [cut, one, whole, text("There are 3 markdown files in ~/drafts.")], request)
    assert code == 0 and out["status"] == "answered" and "3" in out["answer"], out
    assert "cut short by a limit" in llm.requests[2].messages[-1]["content"], llm.requests[2].messages[-1]
    assert replays_clean(capsys, out["turn_id"])

    code, out, _ = run(monkeypatch, capsys, [cut, one, one, one], request)
    assert code != 0 and out["status"] == "unverified", out
    assert "cut short by a limit" in out["failure"]["message"] and "find_files" in out["failure"]["message"], out
    assert replays_clean(capsys, out["turn_id"])

    code, out, _ = run(monkeypatch, capsys, [cut, one], request, "--set", "grounding_whole_counts=false")
    assert out["status"] == "answered" and "1 markdown" in out["answer"], out
