"""What the fault batteries still found, each fixed and held here (issue 34 item 5): real `metnos` processes."""

from __future__ import annotations

import os

import orjson
import pytest

from tests.support.cli_process import Home, initialised

# Every command a user can start without a model or a network, each with what it needs to get past argparse.
COMMANDS = (("turns", "list"), ("events",), ("rebuild",), ("replay", "--all"), ("undo", "--dry-run"), ("config", "show"),
            ("executors", "list"), ("log", "check"), ("plans", "list"), ("schedule", "list"))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return initialised(tmp_path_factory.mktemp("findings"))


def test_an_unknown_sandbox_setting_is_refused_by_every_command_with_its_fix(home: Home) -> None:
    for command in COMMANDS:
        done = home.run(*command, METNOS_SANDBOX="maybe")
        assert done.returncode == 2, (command, done.returncode, done.stdout[-300:], done.stderr[-300:])
        assert "METNOS_SANDBOX='maybe' is not a setting it knows" in done.stderr, (command, done.stderr)
        assert "set METNOS_SANDBOX to on" in done.stderr and "Traceback" not in done.stderr
    # The command that reports on the sandbox says the same as its report, and that nothing can run.
    status = home.run("sandbox", "status", METNOS_SANDBOX="maybe")
    assert status.returncode == 1 and "UNAVAILABLE" in status.stdout and "METNOS_SANDBOX='maybe'" in status.stdout
    assert home.run("turns", "list", METNOS_SANDBOX="off").returncode == 0


def test_events_with_a_topic_no_event_type_has_says_so_and_fails(home: Home) -> None:
    done = home.run("events", "--topic", "TurnStartd")
    assert done.returncode == 2, (done.returncode, done.stdout)
    assert "no event type has 'TurnStartd' in its topic" in done.stderr and "did you mean TurnStarted" in done.stderr
    assert done.stdout == ""
    known = home.run("events", "--topic", "ExecutorRegistered")
    assert known.returncode == 0 and "ExecutorRegistered" in known.stdout, known.stderr
    # A real type that the log has no event of yet is an empty listing, not an error.
    none_yet = home.run("events", "--topic", "TurnUndone")
    assert none_yet.returncode == 0 and none_yet.stdout.count("\n") == 1, none_yet.stdout


def test_read_files_refuses_an_unknown_encoding_and_says_which_to_give(home: Home) -> None:
    (home.user / "a.txt").write_text("hello")
    done = home.run("executors", "run", "read_files", '{"paths": ["~/a.txt"], "encoding": "klingon"}')
    out = orjson.loads(done.stdout)
    assert out["ok"] is False and out["error"]["class"] == "UnknownEncoding" and "entries" not in out, out
    said = done.stdout + done.stderr
    assert "UnknownEncoding" in said and "'klingon' is not a text encoding" in said and "utf-8" in said, said
    assert "hello" not in said
    fine = home.run("executors", "run", "read_files", '{"paths": ["~/a.txt"], "encoding": "latin-1"}')
    assert fine.returncode == 0 and "hello" in fine.stdout, fine.stdout + fine.stderr


def test_a_part_of_the_workspace_made_by_another_user_names_the_owner_and_how_to_give_it_back(home: Home) -> None:
    log_file = home.data / "log" / "data.mdb"
    os.chown(log_file, 65534, 65534)  # as a `sudo metnos ...` of another user would leave it
    try:
        for command in (("turns", "list"), ("events",), ("log", "check")):
            done = home.run(*command)
            assert done.returncode == 2, (command, done.stderr)
            assert f"{log_file}, in your workspace, belongs to" in done.stderr and "(uid 65534), not to you" in done.stderr
            assert "sudo chown -R " in done.stderr and f" {log_file}`, then run the command again" in done.stderr
            assert "Traceback" not in done.stderr
    finally:
        os.chown(log_file, os.geteuid(), os.getegid())
    assert home.run("turns", "list").returncode == 0
