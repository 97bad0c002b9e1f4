def birth_listed_program_runs_with_its_arguments(run, tmp):
    (tmp / "notes").mkdir()
    (tmp / "notes" / "a.txt").write_text("one\ntwo\nthree\n")
    out = run({"program": "wc", "args": ["-l", "~/notes/a.txt"]})
    assert out["ok"] is True and out["exit_code"] == 0, out
    assert out["stdout"].split()[0] == "3" and out["truncated"] == {"stdout": False, "stderr": False}, out


def birth_unlisted_program_is_refused_naming_the_setting(run, tmp):
    out = run({"program": "rm", "args": ["-rf", "~"]})
    assert out["ok"] is False and out["error"]["class"] == "NotListed", out
    assert "[commands] allow" in out["error"]["message"]
    out = run({"program": "du -sh ~/x"})
    assert out["error"]["class"] == "InvalidArgument", out


def birth_forbidden_runs_nothing(run, tmp):
    out = run({"program": "ls"}, config={"commands": {"shell": "forbidden", "allow": ["ls"]}})
    assert out["ok"] is False and out["error"]["class"] == "Forbidden", out


def birth_arguments_are_never_read_by_a_shell(run, tmp):
    (tmp / "x").write_text("")
    out = run({"program": "ls", "args": ["~/x; echo pwned", "$(id)"]})
    assert "pwned" not in out["stdout"] and out["exit_code"] == 2, out
    assert (tmp / "x").exists()


def birth_output_is_bounded_and_said(run, tmp):
    (tmp / "many_lines.txt").write_text("line\n" * 50000)
    out = run({"program": "grep", "args": ["line", "~/many_lines.txt"], "max_output_bytes": 1000})
    assert len(out["stdout"].encode()) == 1000 and out["truncated"]["stdout"] is True, out["truncated"]
    assert out["bytes"]["stdout"] == 250000 and "cut at 1000" in out["note"]


def birth_non_zero_exit_is_reported(run, tmp):
    out = run({"program": "ls", "args": ["~/missing"]})
    assert out["ok"] is False and out["exit_code"] == 2 and out["error"]["class"] == "NonZeroExit", out
    assert "missing" in out["error"]["message"]


def birth_time_is_bounded_and_said(run, tmp):
    (tmp / "log").write_text("started\n")
    out = run({"program": "tail", "args": ["-f", "~/log"], "timeout_s": 1})
    # What tail printed before the stop is kept, but how much it printed by then depends on the load.
    assert out["ok"] is False and out["timed_out"] is True and out["exit_code"] is None, out
    assert out["error"]["class"] == "TimedOut" and out["duration_ms"] >= 1000, out
