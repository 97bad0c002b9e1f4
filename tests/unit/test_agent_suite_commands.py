"""The agent benchmark's command tasks: their homes are what the requests say, and their checks
take the answers the real programs support and refuse the ones they do not (no model is run)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.agent_suite import TASKS, Outcome, build_home

BY_ID = {t.id: t for t in TASKS}


def outcome(home: Path, answer: str) -> Outcome:
    return Outcome(answer=answer, home=home, outbox=[], schedules=[])


def test_music_disk_space_takes_what_du_says_and_nothing_far_from_it(tmp_path: Path) -> None:
    task = BY_ID["music_disk_space"]
    build_home(task, tmp_path)
    du = subprocess.run(["du", "-sh", str(tmp_path / "Music")], capture_output=True, text=True, check=True).stdout
    size = du.split()[0]
    check = task.check
    assert check(outcome(tmp_path, f"Your Music folder takes {size} on disk."))[0], size
    for right in ("about 1.5 MB", "1,4 MiB", "1468 KiB", "1500000 bytes", "1.5M"):
        assert check(outcome(tmp_path, right))[0], right
    for wrong in ("150 KB", "15 MB", "1.5 GB", "1.5", "three files", ""):
        ok, why = check(outcome(tmp_path, wrong))
        assert not ok and "no size near 1500000" in why, wrong


def test_garden_repo_changes_is_a_repository_with_what_the_check_asks(tmp_path: Path) -> None:
    task = BY_ID["garden_repo_changes"]
    build_home(task, tmp_path)
    repo = tmp_path / "projects" / "garden"
    status = subprocess.run(["git", "status", "--short"], cwd=repo, capture_output=True, text=True, check=True,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}).stdout
    assert status.splitlines() == [" M beds.txt", "?? compost.md"], status
    check = task.check
    assert check(outcome(tmp_path, f"Since the last commit:\n{status}"))[0]
    assert check(outcome(tmp_path, "beds.txt was modified and compost.md is new, not yet committed."))[0]
    for wrong in ("beds.txt was modified.", "Nothing changed.", "watering.md and beds.txt changed"):
        assert not check(outcome(tmp_path, wrong))[0], wrong


@pytest.mark.parametrize("task_id", ["music_disk_space", "garden_repo_changes"])
def test_the_command_tasks_need_one_call(task_id: str) -> None:
    assert BY_ID[task_id].tools == 1 and BY_ID[task_id].world == ""
