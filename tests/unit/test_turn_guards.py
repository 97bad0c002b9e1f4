import pytest

from metnos.runtime.turn.guards import ALLOW, CAP_SAME_EXECUTOR, CAP_STEPS, DUPLICATE_READ, REPEATED_ACTION, TurnGuards, targets_of


def run(guards, step, name, args, ok=True):
    d = guards.check(name, args)
    assert d.allowed, d
    return guards.record(step, name, args, executed=True, succeeded=ok)


def test_cap_steps_ends_the_turn_at_the_thirty_first_proposal():
    g = TurnGuards()
    for step in range(1, 31):
        g = run(g, step, f"get_now{step % 4}", {"i": step})
    d = g.check("get_now", {})
    assert d.outcome == CAP_STEPS and d.ends_turn and "30" in d.message


def test_refused_proposals_still_count_as_steps():
    g = TurnGuards(cap_steps=3)
    for step in range(1, 4):
        g = g.record(step, "delete_files", {}, executed=False, succeeded=False)
    assert g.check("get_now", {}).outcome == CAP_STEPS
    assert g.calls.get("delete_files", 0) == 0


def test_cap_same_executor_is_ten_and_two_for_vectorial():
    # Each call with other arguments: the very same call again is a repeat, caught before any cap.
    g = TurnGuards()
    for step in range(1, 11):
        g = run(g, step, "get_now", {"timezone": f"Etc/GMT+{step}"})
    d = g.check("get_now", {"timezone": "UTC"})
    assert d.outcome == CAP_SAME_EXECUTOR and d.ends_turn
    assert g.check("get_time", {}).allowed
    v = TurnGuards()
    for step in (1, 2):
        v = v.record(step, "find_similar", {"text": str(step)}, executed=True, succeeded=True)
    assert v.check("find_similar", {"text": "3"}, vectorial=True).outcome == CAP_SAME_EXECUTOR
    assert v.check("find_similar", {"text": "3"}, vectorial=False).allowed


def test_duplicate_read_is_intercepted_with_the_step_that_has_the_data():
    g = run(TurnGuards(), 1, "read_files", {"paths": ["/home/u/notes/diary.md"]})
    g = run(g, 2, "get_now", {})
    d = g.check("read_files", {"paths": ["/home/u/notes/./diary.md"], "max_lines": 3})
    assert d.outcome == DUPLICATE_READ and not d.ends_turn and d.previous_steps == (1,)
    obs = d.observation()
    assert obs["ok"] is False and "step 1" in obs["error"] and "answer from it" in obs["error"] and '"from_step": 1' in obs["error"]


def test_duplicate_read_allows_new_targets_and_other_executors():
    g = run(TurnGuards(), 1, "read_files", {"path": "/a"})
    assert g.check("read_files", {"paths": ["/a", "/b"]}).allowed
    assert g.check("write_files", {"path": "/a", "content": "x"}).allowed
    g = run(g, 2, "read_files", {"paths": ["/b"]})
    assert g.check("read_files", {"paths": ["/a", "/b"]}).previous_steps == (1, 2)


def test_failed_reads_do_not_arm_the_guard():
    g = run(TurnGuards(), 1, "get_urls", {"urls": ["https://x.org/"]}, ok=False)
    assert g.check("get_urls", {"url": "https://x.org"}).allowed
    g = run(g, 2, "get_urls", {"urls": ["https://x.org/"]})
    assert g.check("get_urls", {"url": "https://x.org"}).outcome == DUPLICATE_READ


def test_scratchpad_read_is_never_guarded():
    g = TurnGuards(guarded={"scratchpad_read": ("scratchpad_id",)})
    g = run(g, 1, "scratchpad_read", {"scratchpad_id": "abc"})
    assert g.check("scratchpad_read", {"scratchpad_id": "abc"}).allowed


def test_state_is_immutable_and_serialisable():
    g0 = TurnGuards()
    g1 = run(g0, 1, "read_files", {"path": "/a"})
    assert g0.steps == 0 and g1.steps == 1 and dict(g0.calls) == {}
    assert g1.to_json()["calls"] == {"read_files": 1}
    assert g1.check("x_y", {}).to_json() == {"outcome": ALLOW, "message": "", "previous_steps": [],
                                              "ends_turn": False}


@pytest.mark.parametrize("name,args,expected", [
    ("read_files", {"paths": ["/a/../b", "", 3]}, {"/b"}),
    ("get_urls", {"urls": ["https://x.org/p/"]}, {"https://x.org/p"}),
    ("get_now", {"path": "/a"}, set()),
])
def test_targets_of(name, args, expected):
    assert targets_of(name, args) == expected


def test_a_piped_call_repeated_as_proposed_is_met() -> None:
    """The 1.5B proposed compute_entries {"op": "count", "from_step": 1} six times; each ran,
    because the call was remembered with its resolved entries and checked as proposed."""
    proposed = {"op": "count", "field": "lines", "from_step": 1}
    resolved = {"op": "count", "field": "lines", "entries": [{"line": "a", "number": 1}]}
    guards = TurnGuards(pure=frozenset({"compute_entries"})).record(
        2, "compute_entries", resolved, executed=True, succeeded=True, proposed=proposed)
    decision = guards.check("compute_entries", proposed)
    assert decision.outcome == DUPLICATE_READ and decision.previous_steps == (2,)
    assert guards.check("compute_entries", {**proposed, "op": "sum"}).allowed


def test_an_action_called_again_with_the_very_same_arguments_is_a_repeat_and_not_run():
    g = TurnGuards(pure=frozenset({"read_files"}))
    reminder = {"executor": "get_now", "cron": "0 9 * * 1"}
    g = run(g, 1, "schedule_recurring", reminder)
    d = g.check("schedule_recurring", dict(reminder))
    assert d.outcome == REPEATED_ACTION and not d.ends_turn and d.previous_steps == (1,), d
    # Told as work done, not as an error to report.
    told = d.observation()
    assert told["ok"] is True and "error" not in told and "error_class" not in told and told["done_at_step"] == 1
    assert told["note"].startswith("done at step 1") and " not " not in f" {told['note']} ", told
    assert d.observation(done_is_ok=False)["ok"] is False  # as turns recorded before it were told
    # Other arguments are another action; a call that failed did nothing, and may be made again.
    assert g.check("schedule_recurring", {**reminder, "cron": "0 9 * * 2"}).allowed
    failed = TurnGuards().record(1, "send_messages", {"to": "x"}, executed=True, succeeded=False)
    assert failed.check("send_messages", {"to": "x"}).allowed
