"""Issue 17 item 5: a boot takes a birth passed under the same conditions, and
runs it again when the files, the tests, the sandbox or the runtime change.

Real parts: the workspace made by ``metnos init``, the LMDB log, and the
birth tests run in bubblewrap (or a plain child where it cannot run). Only
the spawn is wrapped, to count which births actually ran.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import metnos.runtime.birth_reuse as birth_reuse
import metnos.mechanisms.invocation.birth as sandbox_birth
from domain.executor import Executor, executor_id
from metnos.adapters.cli import main
from metnos.runtime.booted import Runtime
from metnos.settings.workspace import Workspace

KEPT = ("get_now", "read_files")


@pytest.fixture
def small_home(home: Path) -> Path:
    """An initialised workspace with two seeds left, so each boot is quick."""
    seeds = Workspace.from_env().executors_origin_dir("seed")
    for name_dir in seeds.iterdir():
        if name_dir.is_dir() and name_dir.name not in KEPT:
            shutil.rmtree(name_dir)
    return home


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the executors whose birth tests a boot ran."""
    ran: list[str] = []
    real = sandbox_birth.make_sandboxed_spawn

    def counting(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        spawn = real(*a, **kw)

        def one(req):  # noqa: ANN001, ANN202
            ran.append(req.executor_dir.parent.name)
            return spawn(req)

        return one

    monkeypatch.setattr(sandbox_birth, "make_sandboxed_spawn", counting)
    return ran


def boot_report(**kw):  # noqa: ANN003, ANN201
    ws = Workspace.from_env()
    with Runtime.boot(ws, birth=False) as rt:
        before = rt.log.recorder.max_notification_id() or 0
    with Runtime.boot(ws, **kw) as rt:
        report = rt.report
        appended = (rt.log.recorder.max_notification_id() or 0) - before
    return sorted(e.name for e in report.births_reused), sorted(e.name for e, _ in report.births_passed), report, appended


def birth_record(name: str) -> dict | None:
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        executor: Executor = rt.log.repository.get(executor_id("seed", name))
        return executor.versions["1.0.0"].get("birth")


def test_a_second_boot_takes_the_births_passed_at_the_first_and_spawns_none(small_home: Path, spawned: list[str]) -> None:
    reused, passed, _, _ = boot_report(reuse_births=False)
    assert passed == sorted(KEPT) and reused == []
    assert sorted(spawned) == sorted(KEPT)
    record = birth_record("get_now")
    assert record is not None and record["sandbox"] == birth_reuse.sandbox_fingerprint()
    assert record["runtime"] == birth_reuse.runtime_fingerprint()

    spawned.clear()
    reused, passed, report, appended = boot_report()
    assert reused == sorted(KEPT) and passed == [] and spawned == []
    assert sorted(report.defaults) == sorted(KEPT)
    assert appended == 0  # nothing new: the log is not touched


def test_the_daemon_start_and_the_switch_run_every_birth(small_home: Path, spawned: list[str], monkeypatch) -> None:
    boot_report()
    spawned.clear()
    reused, passed, _, appended = boot_report(reuse_births=False)
    assert reused == [] and passed == sorted(KEPT) and sorted(spawned) == sorted(KEPT)
    assert appended == len(KEPT)  # one BirthTestsPassed each

    spawned.clear()
    monkeypatch.setenv(birth_reuse.ENV_REUSE, "0")
    reused, passed, _, _ = boot_report()
    assert reused == [] and passed == sorted(KEPT)


def test_changed_birth_tests_quarantine_before_they_run_and_are_born_again_when_lifted(small_home: Path, spawned: list[str]) -> None:
    boot_report()
    birth = Workspace.from_env().executors_origin_dir("seed") / "get_now" / "1.0.0" / "tests" / "birth.py"
    birth.write_text(birth.read_text() + "\n\ndef birth_always_fails(run, tmp):\n    assert False, 'changed on purpose'\n")
    spawned.clear()
    reused, passed, report, _ = boot_report()
    # tests/birth.py is signed: the changed file fails its check, and nothing runs.
    assert reused == ["read_files"] and "get_now" not in spawned
    assert [(q.name, q.file, q.check) for q in report.quarantined] == [("get_now", "tests/birth.py", "digest")]
    assert birth_record("get_now") is None  # the quarantine voids the old pass

    # Put right and rehabilitated, it is born again before it is taken as born.
    birth.write_text(birth.read_text().split("\n\ndef birth_always_fails")[0])
    assert main(["executors", "rehabilitate", "get_now"]) == 0
    spawned.clear()
    reused, passed, report, _ = boot_report()
    assert "get_now" in passed and "get_now" in spawned and not report.quarantined


def test_another_sandbox_or_runtime_runs_the_births_again(small_home: Path, spawned: list[str], monkeypatch) -> None:
    boot_report()
    monkeypatch.setattr(birth_reuse, "runtime_fingerprint", lambda: "metnos 9.9.9; code other")
    spawned.clear()
    reused, passed, _, _ = boot_report()
    assert reused == [] and passed == sorted(KEPT)
    assert birth_record("read_files")["runtime"] == "metnos 9.9.9; code other"

    # The sandbox turned off is another sandbox: its births run (unsandboxed) and are not taken for the sandbox's.
    monkeypatch.setenv("METNOS_SANDBOX", "off")
    reused, passed, _, _ = boot_report()
    assert reused == [] and passed == sorted(KEPT)
    assert birth_record("read_files")["sandbox"].startswith("off;")


def test_a_reused_birth_never_spares_the_signature_check(small_home: Path, spawned: list[str]) -> None:
    boot_report()
    code = Workspace.from_env().executors_origin_dir("seed") / "read_files" / "1.0.0" / "main.py"
    code.write_text(code.read_text() + "\n# tampered\n")
    spawned.clear()
    reused, passed, report, _ = boot_report()
    assert reused == ["get_now"] and "read_files" not in spawned
    bad = [q for q in report.quarantined if q.name == "read_files"]
    assert bad and bad[0].file == "main.py"


def test_verify_and_the_daemon_start_run_the_births_commands_reuse(small_home: Path, spawned: list[str], capsys) -> None:
    boot_report()
    spawned.clear()
    assert main(["executors", "list"]) == 0
    assert spawned == []
    assert main(["executors", "verify"]) == 0
    assert sorted(spawned) == sorted(KEPT)
    spawned.clear()
    assert main(["daemon", "--once"]) == 0
    assert sorted(spawned) == sorted(KEPT)
