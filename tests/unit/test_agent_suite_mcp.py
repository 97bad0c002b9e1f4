"""The agent benchmark's MCP tasks: their checkers and the repository their world makes."""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from bench.agent_suite import TASKS, Outcome
from bench.mcp_world import COMMITS, REPO, SERVERS, make_repository


def _outcome(answer: str, home: Path = Path("/nonexistent")) -> Outcome:
    return Outcome(answer=answer, home=home, outbox=[], schedules=[])


def _task(task_id: str):
    return next(t for t in TASKS if t.id == task_id)


def test_the_tokyo_time_passes_with_the_time_there_and_fails_with_another() -> None:
    check = _task("mcp_time_tokyo").check
    now = datetime.now(ZoneInfo("Asia/Tokyo"))
    assert check(_outcome(f"It is {now:%H:%M} in Tokyo."))[0]
    twelve = now.strftime("%I:%M").lstrip("0") + (" pm" if now.hour >= 12 else " am")
    assert check(_outcome(f"In Tokyo it's {twelve}."))[0]
    wrong = now - timedelta(hours=3)
    ok, why = check(_outcome(f"It is {wrong:%H:%M} in Tokyo."))
    assert not ok and "Asia/Tokyo" in why
    assert not check(_outcome("I do not know what time it is."))[0]


def test_the_mcp_tasks_name_their_world_and_its_servers_exist() -> None:
    worlds = {t.id: t.world for t in TASKS if t.world.startswith("mcp:")}
    assert worlds == {"mcp_time_tokyo": "mcp:time", "mcp_git_last_commit": "mcp:git"}
    assert {w.split(":", 1)[1] for w in worlds.values()} <= set(SERVERS)


def test_the_last_commit_check_reads_the_repository_the_world_makes(tmp_path: Path) -> None:
    folder = make_repository(tmp_path)
    assert folder == tmp_path / REPO
    last = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=folder, capture_output=True, text=True, check=True)
    assert last.stdout.strip() == COMMITS[-1]
    check = _task("mcp_git_last_commit").check
    assert check(_outcome(f"The last commit is: {last.stdout.strip()}"))[0]
    assert not check(_outcome(f"The last commit is: {COMMITS[0]}"))[0]
