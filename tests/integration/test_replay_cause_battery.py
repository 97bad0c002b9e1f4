"""Replay's causes under edits the fault batteries made (issue 34 item 5): each edit explained by one
right cause, and no note left over from a cause that is not there."""

from __future__ import annotations

from uuid import UUID

from domain.turn import Turn
from metnos.mechanisms.store.records import encode_event
from tests.support.log_surgery import drop_event, replace_record
from tests.integration.test_replay_causes import causes_of, copy, edit_log, recorded, replay  # noqa: F401 - fixtures


def names(rows) -> list[str]:
    return [type(r[3]).__name__ for r in rows]


def replies(rows) -> list:
    return [r for r in rows if isinstance(r[3], Turn.LLMReplied)]


def only_cause(result: dict, shown: str) -> dict:
    """The one cause given, and the text report holding it and no note."""
    [cause] = result["divergence"]["causes"]
    assert f"why: {cause['message']}" in shown
    assert result["divergence"]["note"] == "" and "note:" not in shown, shown
    return cause


def test_a_consistent_edit_of_a_reply_and_the_answer_after_it_is_named_against_what_the_model_sent(copy, capsys) -> None:
    _, turn_id = copy

    def edit(txn, rows, dbs):
        mapper = dbs["log"].mapper
        for version, key, _, event in rows:
            if isinstance(event, Turn.LLMReplied) and event.round == 2:
                edited = Turn.LLMReplied(originator_id=event.originator_id, originator_version=version, timestamp=event.timestamp,
                                         round=event.round, reply={**event.reply, "text": "alpha, beta, delta"}, intent_ms=event.intent_ms)
                edit.position = version
            elif isinstance(event, Turn.TurnAnswered):
                edited = Turn.TurnAnswered(originator_id=event.originator_id, originator_version=version, timestamp=event.timestamp,
                                           text="alpha, beta, delta", steps=event.steps)
            else:
                continue
            replace_record(txn, dbs["recorder"], key, encode_event(mapper.to_stored_event(edited)))

    edit_log(turn_id, edit)
    code, result, shown = replay(capsys, turn_id)
    assert code == 1 and result["divergence"]["position"] == edit.position
    cause = only_cause(result, shown)
    assert cause["kind"] == "edited-reply" and "is not what the model sent" in cause["message"]
    assert f"position {edit.position} (round 2)" in cause["message"]
    diff = cause["diff"].splitlines()
    assert '-  "text": "alpha, beta, gamma",' in diff and '+  "text": "alpha, beta, delta",' in diff


def test_two_swapped_replies_are_one_swap(copy, capsys) -> None:
    _, turn_id = copy

    def swap(txn, rows, dbs):
        (v_a, key_a, value_a, _), (v_b, key_b, value_b, _) = replies(rows)[0], replies(rows)[-1]
        replace_record(txn, dbs["recorder"], key_a, value_b)
        replace_record(txn, dbs["recorder"], key_b, value_a)
        swap.versions = (v_a, v_b)

    edit_log(turn_id, swap)
    code, result, shown = replay(capsys, turn_id)
    assert code == 1
    first, second = swap.versions
    cause = only_cause(result, shown)
    assert cause == {"kind": "out-of-order", "message": (f"events out of order in the log: LLMReplied (event {first}) is stored "
                                                         f"after LLMReplied (event {second}), in each other's place")}


def test_a_deleted_reply_is_one_missing_event_and_no_note(copy, capsys) -> None:
    _, turn_id = copy

    def delete(txn, rows, dbs):
        version, _, _, _ = replies(rows)[-1]
        drop_event(txn, dbs["recorder"], UUID(turn_id), version)
        delete.around = (version, *(names(rows)[version - 2 : version + 1 : 2]))

    edit_log(turn_id, delete)
    code, result, shown = replay(capsys, turn_id)
    assert code == 1
    version, before, after = delete.around
    cause = only_cause(result, shown)
    assert cause["message"] == (f"event {version} of the turn is missing from the log, between {before} (event {version - 1}) "
                                f"and {after} (event {version + 1})")


def test_re_execute_in_text_names_the_changed_file_and_shows_the_difference(copy, capsys) -> None:
    root, turn_id = copy
    (root / "user" / "notes.md").write_text("alpha\nbeta\ngamma\ndelta\n")
    code, result, shown = replay(capsys, turn_id, "--re-execute")
    assert code == 1
    [drift] = result["drift"]
    path = drift["now"]["entries"][0]["path"]
    then = drift["recorded"]["entries"][0]["path"]  # the workspace was copied: the same file, under another home
    assert f"turn {turn_id} step 1: read_files now observes something else than recorded (compared by value)" in shown
    lines = shown.splitlines()
    assert f"  file {path} (then {then}) changed since the turn:" in lines
    assert "    --- recorded" in lines and "    +++ now" in lines and "    +delta" in lines
    assert "    -delta" not in lines and "     gamma" in lines
