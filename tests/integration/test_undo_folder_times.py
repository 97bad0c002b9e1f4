"""Undo and the folders around what it puts back, with real processes (issue 34 item 5): the folder
holding a file the turn made or removed gets its time back, and an undo refused because only a mode
changed says that it was only a mode."""

from __future__ import annotations

import os

from tests.integration.test_undo_faults import OLD, ask, home, undone  # noqa: F401 - the module's workspace
from tests.support.cli_process import Home
from tests.support.scripted_llm import call


def test_the_folder_of_a_file_made_or_removed_gets_its_time_back(home: Home) -> None:  # noqa: F811
    made, removed = home.user / "made-here", home.user / "removed-here"
    for folder in (made, removed):
        folder.mkdir()
    (removed / "old.txt").write_text("old")
    os.utime(removed / "old.txt", ns=(OLD, OLD))
    for n, folder in enumerate((made, removed)):
        os.utime(folder, ns=(OLD, OLD + n))
    ask(home, call("write_files", {"files": [{"path": "~/made-here/new.txt", "content": "new"}]}), "make a file")
    ask(home, call("delete_files", {"paths": ["~/removed-here/old.txt"]}), "remove a file")
    assert os.lstat(made).st_mtime_ns != OLD and os.lstat(removed).st_mtime_ns != OLD + 1
    for _ in range(2):
        done = home.run("undo")
        assert done.returncode == 0, done.stderr
    assert not (made / "new.txt").exists() and (removed / "old.txt").read_text() == "old"
    assert os.lstat(made).st_mtime_ns == OLD
    assert os.lstat(removed).st_mtime_ns == OLD + 1


def test_an_undo_refused_over_a_mode_alone_says_it_was_only_the_mode(home: Home) -> None:  # noqa: F811
    target = home.user / "mode-only.txt"
    turn = ask(home, call("write_files", {"files": [{"path": "~/mode-only.txt", "content": "as the turn left it"}]}), "write it")
    mode = target.stat().st_mode & 0o777
    target.chmod(0o600 if mode != 0o600 else 0o640)
    done = home.run("undo")
    assert done.returncode == 1, done.stdout
    assert "only the mode of 1 path(s) changed since the turn, their contents are as it left them" in done.stderr, done.stderr
    assert f"with mode {mode:04o}, now " in done.stdout and "only its mode changed" in done.stdout, done.stdout
    assert target.read_text() == "as the turn left it" and not undone(home, turn)
    # Bytes changed as well: the general refusal, not the mode's.
    target.write_text("edited")
    done = home.run("undo")
    assert done.returncode == 1 and "refused: files changed since the turn" in done.stderr, done.stderr
    assert home.run("undo", "--force").returncode == 0 and not target.exists()
