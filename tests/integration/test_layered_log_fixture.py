"""Issue 31 item 5: a log recorded before the code moved replays clean and rebuilds to the same bytes.

tests/fixtures/layered_log/recorded/ holds a log recorded by
tests/fixtures/layered_log/record.py with the code as it was before the move
(its expected.json names the commit): files read and found, a page fetched, a
schedule made and fired, a deletion approved, cascade hits (L0 and L1), a
write undone. Here it goes into a fresh workspace, whose executors `metnos
init` signed with a key of its own: the log records executors' digests, which
do not depend on the key, and replay feeds the recorded observations without
running anything, so no key of the recording is needed (none was kept).
Everything is driven through the CLI, as a user would.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.support.cli_process import Home
from tests.support.projection_digest import projection_digests, view_databases

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "layered_log" / "recorded"
# `metnos init`'s own log and what was folded from it, which the recorded log replaces.
_DERIVED = ("log", "views", ".audit", "turns")


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((RECORDED / "expected.json").read_text())


@pytest.fixture
def workspace(tmp_path: Path, initialised_workspace: Callable[[str], Path], expected: dict) -> Home:
    """A workspace `metnos init` made, its log replaced by the recorded one, under the config it ran with."""
    shutil.copytree(initialised_workspace("metnos_home"), tmp_path, symlinks=True, dirs_exist_ok=True)
    home = Home(tmp_path)
    for name in _DERIVED:
        shutil.rmtree(home.data / name, ignore_errors=True)
    (home.data / "log").mkdir(mode=0o700)
    shutil.copyfile(RECORDED / "log" / "data.mdb", home.data / "log" / "data.mdb")
    # The offer the log was recorded under was then the default, and so not in its config.toml: a replay
    # under another offer rightly names the setting as the cause of a divergence.
    (home.metnos_home / "config" / "config.toml").write_text(expected["config_toml"] + '\n[turn]\noffer = "shortlist"\n')
    seeds_as_recorded(home, expected["recorded_with"]["commit"], tmp_path / "recorded-seeds")
    return home


def seeds_as_recorded(home: Home, commit: str, scratch: Path) -> None:
    """The seed executors as the recording had them: one added since is removed, one changed since is
    put back from the commit the log was recorded with, signed by this workspace's key. A catalogue that
    grew or changed is a cause replay rightly names as a divergence; this test is about code that moved."""
    from metnos.mechanisms.executors.install import install_executor
    from metnos.mechanisms.executors.keys import load_signing_key
    from metnos.settings.workspace import Workspace

    repo = Path(__file__).resolve().parents[2]
    if subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode:
        pytest.skip(f"the commit the fixture was recorded with ({commit}) is not in this checkout's history")
    recorded = subprocess.run(["git", "-C", str(repo), "ls-tree", "-d", "--name-only", f"{commit}:executors"],
                              capture_output=True, text=True, check=True).stdout.split()
    changed = subprocess.run(["git", "-C", str(repo), "diff", "--name-only", commit, "--", "executors"],
                             capture_output=True, text=True, check=True).stdout.split()
    workspace = Workspace.from_env(home.env())
    seeds = workspace.executors_origin_dir("seed")
    for folder in sorted(p for p in seeds.iterdir() if p.is_dir()):
        if folder.name not in recorded:
            shutil.rmtree(folder)
        elif any(c.startswith(f"executors/{folder.name}/") for c in changed):
            source = scratch / folder.name
            source.mkdir(parents=True)
            archive = subprocess.run(["git", "-C", str(repo), "archive", commit, f"executors/{folder.name}"],
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "--strip-components=2", "-C", str(source)], input=archive, check=True)
            shutil.rmtree(folder)
            install_executor(source, seeds, load_signing_key(workspace))


def run(home: Home, *argv: str) -> str:
    done = home.run(*argv, timeout=120)
    assert done.returncode == 0, f"metnos {' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_recorded_log_replays_clean_and_rebuilds_to_the_recorded_projections(workspace: Home, expected: dict) -> None:
    # Every event still decodes, as the kind it was recorded as.
    events = [orjson.loads(line) for line in run(workspace, "events", "--json").splitlines()]
    assert len(events) == expected["events"]
    kinds = Counter(e["topic"].rsplit(".", 1)[-1].rsplit(":", 1)[-1] for e in events)
    assert dict(sorted(kinds.items())) == expected["event_kinds"]

    done = workspace.run("replay", "--all", "--json", timeout=120)
    assert done.stdout.strip(), f"metnos replay --all exited {done.returncode} and printed nothing:\n{done.stderr}"
    replayed = orjson.loads(done.stdout)
    diverged = [r["divergence"] for r in replayed["results"] if not r["same_path"]]
    assert not diverged, f"{len(diverged)} turns diverged; the first:\n{json.dumps(diverged[0], indent=1)[:4000]}"
    assert done.returncode == 0, done.stderr
    # Replay finds turns by the topic of TurnStarted: a moved event class not found by its recorded topic replays nothing.
    assert replayed["turns"] == expected["turns"]
    assert sorted(r["turn_id"] for r in replayed["results"]) == sorted(t["turn_id"] for t in expected["recorded_turns"])
    assert all(r["same_path"] and not r["stopped"] and not r["drift"] for r in replayed["results"])
    assert sum(r["events"] for r in replayed["results"]) == expected["replayed_events"]

    out = run(workspace, "rebuild")
    names = re.findall(r"^rebuilt (\S+): \d+ bytes$", out, re.MULTILINE)
    assert sorted(names) == sorted(expected["projections"]), out
    # Booting the runtime for replay and rebuild appended nothing to the log.
    assert re.search(rf"^{len(names)} projections over {expected['events']} events", out, re.MULTILINE), out
    assert view_databases(workspace.data) == expected["view_databases"]
    assert projection_digests(workspace.data, names) == expected["projections"]
