"""Issue 8: the scheduler on a real workspace (LMDB log, signed seeds, sandboxed runs).

Time is a hand-moved clock passed to the runtime: no test sleeps to wait for
a slot. The last test runs ``metnos daemon`` as a real process, kills it
with SIGKILL in the middle of a firing and restarts it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from uuid import uuid4

import orjson
import pytest

from metnos.adapters.cli import main
from domain.executor import executor_id
from domain.turn import Turn
from metnos.runtime.booted import Runtime
from metnos.runtime.jobs import CallbackContext
from metnos.runtime.lifecycle import revive_used
from metnos.runtime.scheduler.ager import run_executor_ager
from projections.catalog import invocable
from metnos.runtime.scheduler import callbacks, firing
from metnos.runtime.scheduler.clock import CLOCK_FILE_ENV, ManualClock
from domain.due import stamp
from metnos.runtime.scheduler.service import ScheduleService, SchedulerError
from metnos.runtime.scheduler.tick import Scheduler
from metnos.runtime.step.schedule_tools import TOOLS, call_tool
from metnos.settings.workspace import Workspace
from tests.support.workspace_template import initialise

UTC = timezone.utc
START = datetime(2030, 5, 1, 7, 58, 30, tzinfo=UTC)


def at(h: int, m: int = 0, s: int = 0, day: int = 1) -> datetime:
    return datetime(2030, 5, day, h, m, s, tzinfo=UTC)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One initialised workspace per module (init runs the birth tests); each test gets a copy."""
    root = tmp_path_factory.mktemp("sched-template")
    mp = pytest.MonkeyPatch()
    mp.setenv("METNOS_HOME", str(root / "home"))
    (root / "user").mkdir()
    mp.setenv("HOME", str(root / "user"))
    for key in ("PERSISTENCE_MODULE", "LMDB_PATH", CLOCK_FILE_ENV):
        mp.delenv(key, raising=False)
    initialise(os.environ)
    mp.undo()
    yield root / "home"


@pytest.fixture
def home(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    target = tmp_path / "home"
    shutil.copytree(template, target)
    monkeypatch.setenv("METNOS_HOME", str(target))
    # The user's home must not contain Metnos's own (masked) folders.
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    for key in ("PERSISTENCE_MODULE", "LMDB_PATH", CLOCK_FILE_ENV):
        monkeypatch.delenv(key, raising=False)
    return target


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def rt(home: Path, clock: ManualClock) -> Iterator[Runtime]:
    runtime = Runtime.boot(Workspace.from_env(), birth=False, clock=clock)
    yield runtime
    runtime.close()


def add(rt: Runtime, **kw) -> str:
    base = {"target": {"kind": "executor", "name": "get_now"}, "cron": "*/5 * * * *", "channel": "none"}
    return ScheduleService(rt).create(**(base | kw))["schedule_id"]


def tick_at(rt: Runtime, clock: ManualClock, when: datetime) -> dict:
    clock.set(when)
    report = Scheduler(rt).tick().to_json()
    assert not report["errors"], report["errors"]
    return report


def history(rt: Runtime, sid: str) -> list[dict]:
    return ScheduleService(rt).history(sid)["events"]


def kinds(rt: Runtime, sid: str) -> list[str]:
    return [e["type"] for e in history(rt, sid)]


def outbox(home: Path) -> list[dict]:
    folder = home / "data" / "outbox"
    return [orjson.loads(p.read_bytes()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []


BAD_ZONE = {"timezone": "Nope/Zone"}


# Cadence ----------------------------------------------------------------------
def test_creation_returns_id_and_next_fire(rt: Runtime) -> None:
    out = ScheduleService(rt).create(target={"kind": "executor", "name": "get_now"}, cron="*/5 * * * *")
    assert set(out) == {"schedule_id", "next_fire"}
    assert out["next_fire"] == stamp(at(8))
    row = ScheduleService(rt).show(out["schedule_id"])
    assert (row["status"], row["on_failure"], row["max_consecutive_failures"], row["channel"]) == ("active", "notify", 3, "outbox")


def test_cron_cadence_and_two_ticks_in_one_slot_fire_once(rt: Runtime, clock: ManualClock) -> None:
    sid = add(rt)
    assert tick_at(rt, clock, at(7, 59))["firings"] == []
    first = tick_at(rt, clock, at(8, 0, 1))
    assert [(f["slot"], f["ok"]) for f in first["firings"]] == [(stamp(at(8)), True)]
    # Same slot again, a second later and at the end of it: nothing.
    assert tick_at(rt, clock, at(8, 0, 2))["firings"] == []
    assert tick_at(rt, clock, at(8, 4, 59))["firings"] == []
    assert [f["slot"] for f in tick_at(rt, clock, at(8, 5))["firings"]] == [stamp(at(8, 5))]
    row = ScheduleService(rt).show(sid)
    assert (row["fired"], row["ok"], row["next_fire"]) == (2, 2, stamp(at(8, 10)))
    # Each firing is an invocation with the scheduler as caller, in the audit too.
    started = [e for e in history(rt, sid) if e["type"] == "FiringFinished"]
    inv = started[0]["invocations"][0]
    assert inv["executor"] == "get_now" and inv["caller"] == {"kind": "scheduler", "schedule_id": sid} and inv["ok"]
    audit = (rt.workspace.audit_dir / "executors").glob("*.jsonl")
    lines = [orjson.loads(line) for p in audit for line in p.read_text().splitlines()]
    assert sum(1 for line in lines if line["caller"].get("schedule_id") == sid) == 2


def test_created_after_its_slot_does_not_fire_for_it(rt: Runtime, clock: ManualClock) -> None:
    clock.set(at(8, 0, 30))
    sid = add(rt)
    assert tick_at(rt, clock, at(8, 1))["firings"] == []
    assert [f["slot"] for f in tick_at(rt, clock, at(8, 6))["firings"]] == [stamp(at(8, 5))]
    assert ScheduleService(rt).show(sid)["fired"] == 1


def test_missed_slots_within_grace_are_recovered_older_are_passed_over(rt: Runtime, clock: ManualClock) -> None:
    sid = add(rt, grace_s=10 * 60)
    report = tick_at(rt, clock, at(8, 31))
    assert [f["slot"] for f in report["firings"]] == [stamp(at(8, 25)), stamp(at(8, 30))]
    assert report["skipped"] == [{"schedule_id": sid, "first": stamp(at(8)), "last": stamp(at(8, 20)), "missed": 5}]
    assert tick_at(rt, clock, at(8, 32))["firings"] == []
    assert kinds(rt, sid).count("FiringSkipped") == 1


def test_paused_slots_are_not_owed(rt: Runtime, clock: ManualClock) -> None:
    service = ScheduleService(rt)
    sid = add(rt)
    service.pause(sid)
    assert tick_at(rt, clock, at(8, 1))["firings"] == []
    clock.set(at(8, 7))
    service.resume(sid)
    assert tick_at(rt, clock, at(8, 8))["firings"] == []
    assert [f["slot"] for f in tick_at(rt, clock, at(8, 10))["firings"]] == [stamp(at(8, 10))]


# Count and expiry ----------------------------------------------------------------
def test_count_closes_the_schedule(rt: Runtime, clock: ManualClock) -> None:
    sid = add(rt, count=2)
    tick_at(rt, clock, at(8, 0))
    report = tick_at(rt, clock, at(8, 5))
    assert report["closed"] == [{"schedule_id": sid, "status": "completed", "reason": "count"}]
    assert tick_at(rt, clock, at(8, 10))["firings"] == []
    row = ScheduleService(rt).show(sid)
    assert (row["status"], row["fired"], row["next_fire"], row["closed_reason"]) == ("completed", 2, None, "count")


def test_one_shot(rt: Runtime, clock: ManualClock) -> None:
    sid = add(rt, count=1, cron="0 9 * * *")
    tick_at(rt, clock, at(9))
    assert ScheduleService(rt).show(sid)["status"] == "completed"


def test_expiry_closes_the_schedule(rt: Runtime, clock: ManualClock) -> None:
    sid = add(rt, expiry=stamp(at(8, 7)))
    assert len(tick_at(rt, clock, at(8, 0))["firings"]) == 1
    report = tick_at(rt, clock, at(8, 5))
    # 08:05 fires; 08:10 is past the expiry, so the schedule closes with it.
    assert [f["slot"] for f in report["firings"]] == [stamp(at(8, 5))]
    assert report["closed"] == [{"schedule_id": sid, "status": "completed", "reason": "expiry"}]
    assert tick_at(rt, clock, at(8, 10))["firings"] == []


def test_expiry_with_no_slot_left_closes_when_it_comes(rt: Runtime, clock: ManualClock) -> None:
    sid = add(rt, cron="0 12 * * *", expiry=stamp(at(10)))
    assert ScheduleService(rt).show(sid)["next_fire"] is None
    assert tick_at(rt, clock, at(9))["closed"] == []
    assert tick_at(rt, clock, at(10))["closed"] == [{"schedule_id": sid, "status": "completed", "reason": "expiry"}]


# on_failure -------------------------------------------------------------------------
def finished(rt: Runtime, sid: str) -> list[tuple]:
    return [(e["attempt"], e["ok"], e["kind"], e["final"], e["action"]) for e in history(rt, sid) if e["type"] == "FiringFinished"]


def test_on_failure_skip(rt: Runtime, clock: ManualClock, home: Path) -> None:
    sid = add(rt, args=BAD_ZONE, on_failure="skip")
    tick_at(rt, clock, at(8))
    assert finished(rt, sid) == [(1, False, "UnknownTimezone", True, "skip")]
    assert outbox(home) == []
    assert ScheduleService(rt).show(sid)["consecutive_failures"] == 1


def test_on_failure_retry(rt: Runtime, clock: ManualClock, home: Path) -> None:
    sid = add(rt, args=BAD_ZONE, on_failure="retry")
    tick_at(rt, clock, at(8))
    assert finished(rt, sid) == [(1, False, "UnknownTimezone", False, "retry"), (2, False, "UnknownTimezone", True, "none")]
    assert outbox(home) == []
    row = ScheduleService(rt).show(sid)
    assert (row["fired"], row["failed"]) == (1, 1)


def test_on_failure_notify_is_the_default_after_one_retry(rt: Runtime, clock: ManualClock, home: Path) -> None:
    sid = add(rt, args=BAD_ZONE, label="morning clock")
    tick_at(rt, clock, at(8))
    assert finished(rt, sid) == [(1, False, "UnknownTimezone", False, "retry"), (2, False, "UnknownTimezone", True, "notify")]
    [message] = outbox(home)
    assert "morning clock" in message["body"] and "UnknownTimezone" in message["body"]
    notice = history(rt, sid)[-1]["notice"]
    assert notice["ok"] and notice["invocation"]["executor"] == "send_messages"


def test_on_failure_cancel(rt: Runtime, clock: ManualClock, home: Path) -> None:
    sid = add(rt, args=BAD_ZONE, on_failure="cancel")
    report = tick_at(rt, clock, at(8))
    assert report["closed"] == [{"schedule_id": sid, "status": "cancelled", "reason": "on_failure"}]
    assert finished(rt, sid) == [(1, False, "UnknownTimezone", True, "cancel")]
    assert "cancelled" in outbox(home)[0]["body"]
    assert tick_at(rt, clock, at(8, 5))["firings"] == []


def test_auto_cancel_after_consecutive_failures(rt: Runtime, clock: ManualClock, home: Path) -> None:
    sid = add(rt, args=BAD_ZONE, on_failure="skip", max_consecutive_failures=3)
    for m in (0, 5):
        tick_at(rt, clock, at(8, m))
    assert ScheduleService(rt).show(sid)["status"] == "active"
    report = tick_at(rt, clock, at(8, 10))
    assert report["closed"] == [{"schedule_id": sid, "status": "cancelled", "reason": "consecutive_failures"}]
    assert history(rt, sid)[-1]["type"] == "ScheduleCancelled"
    assert len(outbox(home)) == 1


def test_a_success_resets_the_failure_streak(rt: Runtime, clock: ManualClock) -> None:
    service = ScheduleService(rt)
    sid = add(rt, args=BAD_ZONE, on_failure="skip", max_consecutive_failures=2)
    tick_at(rt, clock, at(8))
    service.modify(sid, {"args": {}})
    tick_at(rt, clock, at(8, 5))
    service.modify(sid, {"args": BAD_ZONE})
    tick_at(rt, clock, at(8, 10))
    row = service.show(sid)
    assert (row["status"], row["consecutive_failures"], row["ok"], row["failed"]) == ("active", 1, 1, 2)


# The loop survives ------------------------------------------------------------------
def test_one_failing_task_never_stops_the_loop(rt: Runtime, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    @callbacks.register("test_boom")
    def boom(ctx, args):  # noqa: ANN001, ANN202
        raise RuntimeError("the job has a bug")

    service = ScheduleService(rt)
    bad = service.create(target={"kind": "callback", "key": "test_boom"}, cron="*/5 * * * *", channel="none", owner="builtin", on_failure="skip")["schedule_id"]
    good = add(rt)
    real = firing.run_target
    broken = add(rt, cron="*/5 * * * *")

    def run_target(runtime, sid, target, args, now, **kw):  # noqa: ANN001, ANN202, ANN003
        if sid == broken:
            raise OSError("disk on fire")
        return real(runtime, sid, target, args, now, **kw)

    monkeypatch.setattr(firing, "run_target", run_target)
    clock.set(at(8))
    report = Scheduler(rt).tick().to_json()
    assert [e["schedule_id"] for e in report["errors"]] == [broken]
    by = {f["schedule_id"]: f for f in report["firings"]}
    assert by[bad]["kind"] == "CallbackError" and by[good]["ok"]
    assert "the job has a bug" in history(rt, bad)[-1]["error"]["message"]
    # The broken one's attempt is open; once the fault is gone, the next tick resolves it.
    monkeypatch.setattr(firing, "run_target", real)
    report = tick_at(rt, clock, at(8, 1))
    assert [(f["schedule_id"], f["kind"], f["action"]) for f in report["firings"]][:2] == [(broken, "Interrupted", "recover"), (broken, "ok", "none")]


# Restart in the middle of a firing --------------------------------------------------
class Crash(BaseException):
    """Stands for the process dying: nothing after it runs."""


def crash_during_firing(rt: Runtime, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, when: datetime) -> None:
    def dies(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise Crash

    with monkeypatch.context() as m:
        m.setattr(firing, "run_target", dies)
        clock.set(when)
        with pytest.raises(Crash):
            Scheduler(rt).tick()


def test_restart_mid_firing_recovers_an_idempotent_target_once(home: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        sid = add(rt)
        crash_during_firing(rt, clock, monkeypatch, at(8))
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        assert kinds(rt, sid)[-1] == "FiringStarted"
        report = tick_at(rt, clock, at(8, 1))
        assert [(f["slot"], f["attempt"], f["kind"], f["action"]) for f in report["firings"]] == [
            (stamp(at(8)), 1, "Interrupted", "recover"), (stamp(at(8)), 2, "ok", "none")]
        events = history(rt, sid)
        starts = [(e["slot"], e["attempt"], e["recovery"]) for e in events if e["type"] == "FiringStarted"]
        assert starts == [(stamp(at(8)), 1, False), (stamp(at(8)), 2, True)]
        # Counted once; never fired a third time.
        assert ScheduleService(rt).show(sid)["fired"] == 1
        assert tick_at(rt, clock, at(8, 2))["firings"] == []
        assert [f["slot"] for f in tick_at(rt, clock, at(8, 5))["firings"]] == [stamp(at(8, 5))]


def test_restart_mid_firing_never_reruns_a_side_effect(home: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        sid = add(rt, target={"kind": "executor", "name": "send_messages"}, args={"messages": [{"to_user": "me", "body": "drink water"}]},
                  approved_by="test:user")
        crash_during_firing(rt, clock, monkeypatch, at(8))
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        report = tick_at(rt, clock, at(8, 1))
        assert [(f["attempt"], f["kind"], f["final"], f["action"]) for f in report["firings"]] == [(1, "Interrupted", True, "notify")]
    bodies = [m["body"] for m in outbox(home)]
    # Only the notice: the message itself is not sent a second time blindly.
    assert len(bodies) == 1 and "Interrupted" in bodies[0] and "drink water" not in bodies[0]


def test_crash_between_a_failure_and_its_retry(home: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        sid = add(rt, args=BAD_ZONE, on_failure="retry")
        calls = []
        real = firing.run_target

        def once_then_die(*a, **k):  # noqa: ANN002, ANN003, ANN202
            if calls:
                raise Crash
            calls.append(1)
            return real(*a, **k)

        with monkeypatch.context() as m:
            m.setattr(firing, "run_target", once_then_die)
            clock.set(at(8))
            with pytest.raises(Crash):
                Scheduler(rt).tick()
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        tick_at(rt, clock, at(8, 1))
        # Attempt 2 had started when the process died: it is resolved, and the slot is closed after 2 attempts.
        assert finished(rt, sid) == [(1, False, "UnknownTimezone", False, "retry"), (2, False, "Interrupted", True, "none")]


# Run now, chains, builtin jobs ------------------------------------------------------------
def test_run_now_is_recorded_and_not_counted(rt: Runtime, clock: ManualClock, home: Path) -> None:
    service = ScheduleService(rt)
    sid = add(rt, channel="outbox", count=1)
    clock.set(at(7, 59))
    record = service.run_now(sid)
    assert record["ok"] and record["manual"]
    row = service.show(sid)
    assert (row["fired"], row["manual_runs"], row["status"]) == (0, 1, "active")
    assert len(outbox(home)) == 1
    tick_at(rt, clock, at(8))
    assert service.show(sid)["status"] == "completed"


def test_a_chain_pipes_between_steps(rt: Runtime, clock: ManualClock, home: Path) -> None:
    (Path(os.environ["HOME"]) / "notes").mkdir()
    (Path(os.environ["HOME"]) / "notes" / "a.md").write_text("alpha\n")
    steps = [{"executor": "find_files", "args": {"base_path": "~/notes", "pattern": "*.md"}},
             {"executor": "read_files", "args": {"from_step": 1}}]
    sid = add(rt, target={"kind": "chain", "steps": steps})
    report = tick_at(rt, clock, at(8))
    assert [f["ok"] for f in report["firings"]] == [True], history(rt, sid)[-1]
    invs = history(rt, sid)[-1]["invocations"]
    assert [i["executor"] for i in invs] == ["find_files", "read_files"]


def test_builtin_jobs_install_once_and_run_the_mnestome_maintenance(rt: Runtime, clock: ManualClock) -> None:
    from metnos.runtime.mnestome.record import record_turn
    from tests.support.mnest_turns import scripted_turn

    # Three turns that wanted an executor that does not exist, fed by find_files:
    # a recurring proto-mnest; and one real passing, which will decay.
    for n in range(3):
        turn, closed = scripted_turn(n, at(9, day=1) - timedelta(days=3 - n), "find files and tidy them",
                                     [("find_files", "1.0.0", []), ("tidy_files", None, [(1, "entries", "from_step")])])
        rt.log.save(turn, *record_turn(rt.log, list(turn.pending_events), closed))
    turn, closed = scripted_turn(9, at(9, day=1) - timedelta(days=60), "find files and sort them",
                                 [("find_files", "1.0.0", []), ("sort_entries", "1.0.0", [(1, "entries", "from_step")])])
    rt.log.save(turn, *record_turn(rt.log, list(turn.pending_events), closed))
    rt.refresh()

    service = ScheduleService(rt)
    assert service.install_builtin_jobs() == ["executor_ager", "mnest_ager", "synt_suggest", "plan_maintenance", "synt_introspect",
                                              "proposals_eta", "promoter", "introspection_apply", "proposals_cleanup",
                                              "lifecycle_summary", "skill_sandbox_watchdog", "promoter_digest", "i18n_translate_pending"]
    assert service.install_builtin_jobs() == []
    assert len(service.list(owner="builtin")) == 13
    report = tick_at(rt, clock, at(4, 45, day=2))
    assert {f["kind"] for f in report["firings"]} == {"ok"}
    rows = {r["target"]["key"]: r for r in service.list(owner="builtin")}
    assert all(r["consecutive_failures"] == 0 for r in rows.values())
    rt.refresh()
    mnests = rt.mnestome.state()["mnests"].values()
    sorted_pair = next(m for m in mnests if m["dst_executor"] == "sort_entries")
    assert sorted_pair["state"] == "decaying" and sorted_pair["weight"] < 0.15
    from domain.synthesis import synthesis_id

    suggested = [e for e in rt.log.events.get(synthesis_id("tidy_files")) if type(e).__name__ == "SynthesisSuggested"]
    assert len(suggested) == 1 and suggested[0].source == "find_files" and suggested[0].outcome == "generate"
    # The next day's run says the same thing: nothing new is recorded.
    tick_at(rt, clock, at(4, 45, day=3))
    assert len([e for e in rt.log.events.get(synthesis_id("tidy_files")) if type(e).__name__ == "SynthesisSuggested"]) == 1


def test_executor_ager_marks_idle_executors(home: Path) -> None:
    clock = ManualClock(datetime.now(UTC) + timedelta(days=40))
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        # get_now is used five days before the ager runs; nothing else ever is.
        sid = add(rt, cron="* * * * *", count=1)
        Scheduler(rt).tick()
        clock.advance(minutes=2)
        Scheduler(rt).tick()
        assert ScheduleService(rt).show(sid)["fired"] == 1
        clock.advance(days=5)
        service = ScheduleService(rt)
        job = service.create(target={"kind": "callback", "key": "executor_ager"}, args={"idle_days": 30, "include_seeds": True},
                             cron="* * * * *", channel="none", owner="builtin", count=1)["schedule_id"]
        clock.advance(minutes=1)
        Scheduler(rt).tick()
        events = history(rt, job)
        assert events[-2]["type"] == "FiringFinished" and events[-2]["ok"]
        states = {e["name"]: e["versions"][e["current"]]["state"] for e in rt.catalogue.catch_up(rt.log)["executors"].values()}
        assert states["get_now"] == "active"
        assert states["read_files"] == "below_threshold" and states["send_messages"] == "below_threshold"


def _ager(rt: Runtime, clock: ManualClock, **args) -> dict:
    result = run_executor_ager(CallbackContext(runtime=rt, now=clock(), schedule_id="test"), args)
    assert result.ok, result.error
    rt.log.save(*result.aggregates)
    return result.output


def _states(rt: Runtime) -> dict:
    return {e["name"]: e["versions"][e["current"]] for e in rt.catalogue.catch_up(rt.log)["executors"].values()}


def test_below_threshold_stays_offered_comes_back_on_use_and_is_archived_when_still_idle(home: Path, capsys) -> None:
    clock = ManualClock(datetime.now(UTC) + timedelta(days=40))
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        marked = {m["name"] for m in _ager(rt, clock, idle_days=30, include_seeds=True)["marked"]}
        assert {"get_now", "read_files", "send_messages", "find_files"} <= marked
        states = _states(rt)
        assert states["read_files"]["state"] == "below_threshold"
        # Still loaded and offered until the user decides (seeds/000 ch. 6).
        assert {"read_files", "send_messages"} <= set(invocable(rt.catalogue.catch_up(rt.log)))
        # Used outside a turn (a schedule fires get_now) and inside one (a turn invokes read_files).
        clock.advance(days=1)
        sid = add(rt, cron="* * * * *", count=1)
        Scheduler(rt).tick()
        clock.advance(minutes=2)
        Scheduler(rt).tick()
        assert ScheduleService(rt).show(sid)["fired"] == 1
        step = Turn.StepInvoked(originator_id=uuid4(), originator_version=3, timestamp=clock(), step=1, invocation_id=str(uuid4()),
                                executor="read_files", version="1.0.0", digest="d", args_hash="h", ok=True, kind="ok", exec_ms=1)
        revived = revive_used(rt, [step], clock())
        assert [e.name for e in revived] == ["read_files"]
        rt.log.save(*revived)
        assert _states(rt)["read_files"]["state"] == "active"
        clock.advance(days=14)
        summary = _ager(rt, clock, idle_days=30, include_seeds=True, archive_after_days=14)
        assert [r["name"] for r in summary["revived"]] == ["get_now"]
        assert "send_messages" in {r["name"] for r in summary["archived"]} and "read_files" not in {r["name"] for r in summary["archived"]}
        states = _states(rt)
        assert (states["get_now"]["state"], states["read_files"]["state"], states["send_messages"]["state"]) == ("active", "active", "archived")
        assert "send_messages" not in invocable(rt.catalogue.catch_up(rt.log))
        seeds = rt.workspace.executors_origin_dir("seed")
        version = rt.catalogue.catch_up(rt.log)["executors"]["seed/send_messages"]["current"]
        assert not (seeds / "send_messages" / version).exists() and (seeds / ".archive" / "send_messages" / version / "manifest.toml").exists()
        kinds_of = [type(e).__name__ for e in rt.log.events.get(executor_id("seed", "get_now"))]
        assert kinds_of[-2:] == ["ExecutorBelowThreshold", "ExecutorRevived"]
    # The user keeps one below threshold: promote brings it back to active, as an event, shown by `executors list`.
    clock.advance(days=31)
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        assert "get_now" in {m["name"] for m in _ager(rt, clock, idle_days=30, include_seeds=True)["marked"]}
        assert _states(rt)["get_now"]["state"] == "below_threshold"
    capsys.readouterr()
    assert main(["executors", "list"]) == 0
    assert any(line.split()[:1] == ["get_now"] and "below_threshold" in line and "executors promote get_now" in line
               for line in capsys.readouterr().out.splitlines())
    assert main(["executors", "promote", "get_now"]) == 0
    assert capsys.readouterr().out.strip().endswith(": active (current)")


def test_bad_requests_are_refused_clearly(rt: Runtime) -> None:
    service = ScheduleService(rt)
    cases = [
        ({"target": {"kind": "executor", "name": "summon_demons"}}, "no executor named"),
        ({"cron": "every morning"}, "not a cron expression"),
        ({"args": {"timezone": 3}}, "input schema"),
        ({"expiry": "2000-01-01T00:00:00Z"}, "already past"),
        ({"timezone": "Mars/Base"}, "time zone"),
        ({"on_failure": "panic"}, "on_failure"),
        ({"target": {"kind": "callback", "key": "executor_ager"}}, "builtin"),
    ]
    for fields, message in cases:
        with pytest.raises(SchedulerError, match=message):
            add(rt, **fields)
    with pytest.raises(SchedulerError, match="no schedule"):
        service.show("deadbeef")


# The planner's tools -----------------------------------------------------------------
def test_planner_tools(rt: Runtime, clock: ManualClock) -> None:
    service = ScheduleService(rt)
    assert set(TOOLS) == {"schedule_recurring", "cancel_recurring", "list_recurring", "show_recurring",
                          "toggle_recurring", "history_recurring", "run_now_recurring"}
    for tool in TOOLS.values():
        assert tool.parameters["type"] == "object" and tool.description
    made = call_tool(service, "schedule_recurring", {"executor": "get_now", "cron": "0 8 * * *", "channel": "none", "label": "time"})
    assert made["ok"] and made["next_fire"] == stamp(at(8))
    sid = made["schedule_id"]
    assert [e["schedule_id"] for e in call_tool(service, "list_recurring", {})["entries"]] == [sid]
    assert call_tool(service, "show_recurring", {"schedule_id": sid})["label"] == "time"
    assert call_tool(service, "toggle_recurring", {"schedule_id": sid})["status"] == "paused"
    assert call_tool(service, "toggle_recurring", {"schedule_id": sid, "paused": False})["status"] == "active"
    assert call_tool(service, "run_now_recurring", {"schedule_id": sid})["ok"]
    types = [e["type"] for e in call_tool(service, "history_recurring", {"schedule_id": sid})["entries"]]
    assert types == ["ScheduleCreated", "SchedulePaused", "ScheduleResumed", "FiringStarted", "FiringFinished"]
    assert call_tool(service, "cancel_recurring", {"schedule_id": sid})["status"] == "cancelled"
    refused = call_tool(service, "cancel_recurring", {"schedule_id": sid})
    assert refused == {"ok": False, "error": {"kind": "SchedulerError", "message": "the schedule is already cancelled"}}
    assert call_tool(service, "schedule_recurring", {"cron": "* * * * *"})["error"]["kind"] == "BadArguments"
    assert call_tool(service, "schedule_recurring", {"executor": "get_now"})["error"]["kind"] == "SchemaViolation"
    assert call_tool(service, "schedule_recurring", {"executor": "nope", "cron": "* * * * *"})["error"]["kind"] == "SchedulerError"


# CLI -------------------------------------------------------------------------------------
def test_cli(home: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    clock_file = tmp_path / "now"
    clock_file.write_text(stamp(at(7, 58)))
    monkeypatch.setenv(CLOCK_FILE_ENV, str(clock_file))

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = run("schedule", "add", "--executor", "get_now", "--args", "{}", "--cron", "*/5 * * * *", "--count", "2", "--channel", "none")
    assert code == 0
    made = orjson.loads(out)
    sid = made["schedule_id"]
    assert made["next_fire"] == stamp(at(8))
    assert run("schedule", "add", "--executor", "get_now", "--args", "[", "--cron", "* * * * *")[2].startswith("metnos: --args is not valid JSON")
    assert "not a cron expression" in run("schedule", "add", "--executor", "get_now", "--cron", "soon")[2]
    code, out, _ = run("schedule", "list")
    assert sid in out and "get_now" in out
    assert run("schedule", "pause", sid)[0] == 0
    assert orjson.loads(run("schedule", "show", sid, "--json")[1])["status"] == "paused"
    assert run("schedule", "resume", sid[:13])[0] == 0
    clock_file.write_text(stamp(at(8, 0, 5)))
    code, out, _ = run("daemon", "--once", "--skip-birth")
    assert code == 0
    ticks = [orjson.loads(line) for line in out.splitlines()]
    assert ticks[0]["installed"] == [job.key for job in callbacks.BUILTIN_JOBS]
    assert [f["slot"] for f in ticks[1]["firings"]] == [stamp(at(8))]
    code, out, _ = run("schedule", "run-now", sid)
    assert code == 0 and orjson.loads(out)["manual"]
    code, out, _ = run("schedule", "history", sid)
    assert "ScheduleCreated" in out and "SchedulePaused" in out and "(run-now)" in out and "-> ok" in out
    assert run("schedule", "cancel", sid)[0] == 0
    code, _, err = run("schedule", "cancel", sid)
    assert code == 2 and err.strip() == "metnos: the schedule is already cancelled"
    code, out, _ = run("schedule", "list", "--status", "cancelled", "--json")
    assert [r["id"] for r in orjson.loads(out)] == [sid]


# Schedules in words (seeds/000 ch. 11) ------------------------------------------------------
def test_planner_cron_field_takes_words_and_every_other_friday_skips_off_weeks(rt: Runtime, clock: ManualClock) -> None:
    service = ScheduleService(rt)
    made = call_tool(service, "schedule_recurring", {"executor": "get_now", "cron": "every other Friday at 9", "channel": "none"})
    assert made["ok"] and made["cron"] == "0 9 * * 5 /2w@2030-05-03" and made["said"] == "every other Friday at 9"
    assert made["next_fires"] == [stamp(at(9, day=d)) for d in (3, 17, 31)]
    sid = made["schedule_id"]
    assert [f["slot"] for f in tick_at(rt, clock, at(9, 1, day=3))["firings"]] == [stamp(at(9, day=3))]
    assert tick_at(rt, clock, at(9, 1, day=10))["firings"] == []
    assert [f["slot"] for f in tick_at(rt, clock, at(9, 1, day=17))["firings"]] == [stamp(at(9, day=17))]
    assert ScheduleService(rt).show(sid)["fired"] == 2
    # A plain cron is still taken as it is, and words nobody can read are refused.
    assert "cron" not in call_tool(service, "schedule_recurring", {"executor": "get_now", "cron": "0 8 * * *", "channel": "none"})
    refused = call_tool(service, "schedule_recurring", {"executor": "get_now", "cron": "whenever", "channel": "none"})
    assert refused["error"]["kind"] == "SchedulerError" and "cannot read a schedule from 'whenever'" in refused["error"]["message"]


def test_a_one_shot_in_words_fires_once_and_a_late_creation_does_not_fire_retroactively(rt: Runtime, clock: ManualClock) -> None:
    service = ScheduleService(rt)
    made = call_tool(service, "schedule_recurring", {"executor": "get_now", "cron": "in two hours", "channel": "none"})
    assert made["next_fires"] == [stamp(at(9, 58))]
    assert ScheduleService(rt).show(made["schedule_id"])["count"] == 1
    tick_at(rt, clock, at(9, 58, 10))
    assert ScheduleService(rt).show(made["schedule_id"])["status"] == "completed"


def test_modify_changes_cadence_in_words_target_and_arguments_as_events(rt: Runtime, clock: ManualClock) -> None:
    service = ScheduleService(rt)
    sid = add(rt)
    clock.set(at(8, 1))
    row = service.modify(sid, {}, when="ogni mattina alle 9")
    assert (row["cron"], row["next_fire"]) == ("0 9 * * *", stamp(at(9)))
    row = service.modify(sid, {"target": {"kind": "executor", "name": "get_urls"}, "args": {"urls": ["http://127.0.0.1:9/"]}},
                         approved_by="user:test")
    assert (row["target"], row["args"]) == ({"kind": "executor", "name": "get_urls"}, {"urls": ["http://127.0.0.1:9/"]})
    changes = [e["changes"] for e in history(rt, sid) if e["type"] == "ScheduleModified"]
    assert changes == [{"cron": "0 9 * * *"}, {"target": {"kind": "executor", "name": "get_urls"}, "args": {"urls": ["http://127.0.0.1:9/"]}}]
    send = {"target": {"kind": "executor", "name": "send_messages"}, "args": {"messages": [{"to_user": "me", "body": "hi"}]}}
    with pytest.raises(SchedulerError, match="retargeted to send_messages .* new approval; nothing was changed"):
        service.modify(sid, send)
    assert service.modify(sid, send, approved_by="user:test")["approval"]["executors"] == ["send_messages"]


def test_cli_words_are_shown_back_and_created_only_once_confirmed(home: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    clock_file = tmp_path / "now"
    clock_file.write_text(stamp(at(7, 58)))
    monkeypatch.setenv(CLOCK_FILE_ENV, str(clock_file))

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    code, _, err = run("schedule", "add", "every morning at 8", "--executor", "get_now", "--channel", "none")
    assert code == 2 and "only once confirmed: run again with --yes" in err
    assert orjson.loads(run("schedule", "list", "--json")[1]) == []
    code, out, err = run("schedule", "add", "tomorrow at 9", "--executor", "get_now", "--channel", "none", "--yes")
    assert code == 0 and "'tomorrow at 9' reads as cron '0 9 2 5 *' in UTC (once)" in err and "2030-05-02 09:00 UTC" in err
    sid = orjson.loads(out)["schedule_id"]
    assert run("schedule", "show", sid, "--json")[1] and orjson.loads(run("schedule", "show", sid, "--json")[1])["count"] == 1
    code, out, err = run("schedule", "modify", sid, "every Tuesday at 18:30", "--yes")
    assert code == 0 and orjson.loads(out)["cron"] == "30 18 * * 2"
    assert "2030-05-07 18:30 UTC\n  2030-05-14 18:30 UTC\n  2030-05-21 18:30 UTC" in err
    assert orjson.loads(run("schedule", "show", sid, "--json")[1])["count"] is None
    assert "ScheduleModified   changed: cron '30 18 * * 2', count null" in run("schedule", "history", sid)[1]


# A daemon killed and restarted -------------------------------------------------------------
class SlowPage:
    """A page on 127.0.0.1 that holds each request until released; counts them."""

    def __init__(self) -> None:
        self.requests = 0
        self.arrived = threading.Event()
        self.release = threading.Event()
        page = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # noqa: ANN002
                pass

            def do_GET(self):  # noqa: N802
                page.requests += 1
                page.arrived.set()
                page.release.wait(20)
                body = b"slow hello"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/slow"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class Daemon:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "metnos", "daemon", "--tick", "0.1", "--skip-birth", "--http", "127.0.0.1:0"],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[dict] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(orjson.loads(line))

    def wait_for(self, predicate, timeout: float = 30.0) -> dict:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if predicate(line):
                    return line
            if self.proc.poll() is not None:
                pytest.fail(f"the daemon exited: {self.proc.stderr.read()}")
            time.sleep(0.02)
        pytest.fail(f"timed out; daemon said: {self.lines[-3:]}")

    def wait_ticks(self, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.lines) < count:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                pytest.fail(f"the daemon stopped ticking: {self.lines[-3:]}")
            time.sleep(0.02)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def test_a_daemon_killed_mid_firing_and_restarted(home: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    clock_file = tmp_path / "now"
    clock_file.write_text(stamp(at(7, 58)))
    monkeypatch.setenv(CLOCK_FILE_ENV, str(clock_file))
    page = SlowPage()
    # get_urls reaches what the instance allows.
    Workspace.from_env().config_file.write_text(f'[network]\nallow = ["127.0.0.1:{page.server.server_address[1]}"]\n')
    try:
        capsys.readouterr()
        assert main(["schedule", "add", "--executor", "get_urls", "--args", orjson.dumps({"urls": [page.url]}).decode(),
                     "--cron", "*/5 * * * *", "--channel", "none"]) == 0
        sid = orjson.loads(capsys.readouterr().out)["schedule_id"]
        env = dict(os.environ)
        daemon = Daemon(env)
        daemon.wait_for(lambda line: line["event"] == "tick")
        clock_file.write_text(stamp(at(8, 0, 10)))
        assert page.arrived.wait(30), "the firing never reached the page"
        daemon.kill()  # SIGKILL while get_urls waits for the page
        page.release.set()
        assert page.requests == 1

        daemon = Daemon(env)
        line = daemon.wait_for(lambda line: line["event"] == "tick" and line["firings"])
        assert [(f["attempt"], f["kind"], f["action"]) for f in line["firings"]] == [(1, "Interrupted", "recover"), (2, "ok", "none")]
        # Later ticks in the same slot do nothing; the next slot fires once.
        daemon.wait_ticks(len(daemon.lines) + 3)
        assert all(not ln.get("firings") for ln in daemon.lines[-3:])
        clock_file.write_text(stamp(at(8, 5, 1)))
        line = daemon.wait_for(lambda line: line["event"] == "tick" and any(f["slot"] == stamp(at(8, 5)) for f in line["firings"]))
        daemon.kill()
        every = [f for ln in daemon.lines if ln["event"] == "tick" for f in ln["firings"] if f["schedule_id"] == sid]
        assert [(f["slot"], f["attempt"]) for f in every] == [(stamp(at(8)), 1), (stamp(at(8)), 2), (stamp(at(8, 5)), 1)]
        assert page.requests == 3  # the interrupted attempt, its recovery, the next slot
    finally:
        page.close()
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        events = ScheduleService(rt).history(sid)["events"]
    starts = [(e["slot"], e["attempt"], e["recovery"]) for e in events if e["type"] == "FiringStarted"]
    assert starts == [(stamp(at(8)), 1, False), (stamp(at(8)), 2, True), (stamp(at(8, 5)), 1, False)]
    ends = [(e["slot"], e["attempt"], e["kind"], e["final"]) for e in events if e["type"] == "FiringFinished"]
    assert ends == [(stamp(at(8)), 1, "Interrupted", False), (stamp(at(8)), 2, "ok", True), (stamp(at(8, 5)), 1, "ok", True)]


def test_the_store_rebuilt_from_the_log_is_byte_identical(rt: Runtime, clock: ManualClock) -> None:
    service = ScheduleService(rt)
    a = add(rt, count=2)
    add(rt, args=BAD_ZONE, on_failure="retry")
    b = add(rt, cron="0 9 * * *")
    service.pause(b)
    for m in (0, 5, 10):
        tick_at(rt, clock, at(8, m))
    assert service.show(a)["status"] == "completed"
    live = rt.schedules.state_bytes()
    rt.schedules.rebuild(rt.log)
    assert rt.schedules.state_bytes() == live


def test_a_daemon_killed_at_random_points_loses_no_firing_and_tears_none(home: Path, tmp_path: Path, capsys,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 18 item 6: SIGKILL the daemon at seeded random moments (its boot, a tick, a firing),
    restart it each time; at the end every started attempt is finished, no slot succeeds twice,
    attempts count up without a gap, and the next commands work."""
    import random

    rng = random.Random(int(os.environ.get("METNOS_FAULT_SEED", "18")))
    clock_file = tmp_path / "now"
    clock_file.write_text(stamp(at(7, 59, 30)))
    monkeypatch.setenv(CLOCK_FILE_ENV, str(clock_file))
    capsys.readouterr()
    assert main(["schedule", "add", "--executor", "get_now", "--args", "{}", "--cron", "* * * * *", "--channel", "none"]) == 0
    sid = orjson.loads(capsys.readouterr().out)["schedule_id"]
    env = dict(os.environ)
    kills = 0
    for minute in range(5):
        clock_file.write_text(stamp(at(8, minute, 5)))
        daemon = Daemon(env)
        # Somewhere between its start and well after its first firing.
        time.sleep(rng.uniform(0.2, 4.0))
        if daemon.proc.poll() is None:
            daemon.kill()
            kills += 1
    assert kills >= 3, "the daemon ended by itself instead of being killed"

    daemon = Daemon(env)
    daemon.wait_for(lambda line: line["event"] == "tick" and not line.get("firings"), timeout=120)
    daemon.proc.send_signal(signal.SIGTERM)
    _, err = daemon.proc.communicate(timeout=60)
    assert "Traceback" not in err, err

    capsys.readouterr()
    assert main(["schedule", "history", sid, "--json"]) == 0
    events = orjson.loads(capsys.readouterr().out)["events"]
    started = [(e["slot"], e["attempt"]) for e in events if e["type"] == "FiringStarted"]
    finished = [(e["slot"], e["attempt"]) for e in events if e["type"] == "FiringFinished"]
    assert started, "nothing ever fired"
    assert sorted(started) == sorted(finished), "an attempt was started and never closed"
    assert len(set(started)) == len(started), "an attempt was recorded twice"
    for slot in {s for s, _ in started}:
        attempts = sorted(a for s, a in started if s == slot)
        assert attempts == list(range(1, len(attempts) + 1)), (slot, attempts)
        ok = [e for e in events if e["type"] == "FiringFinished" and e["slot"] == slot and e["kind"] == "ok"]
        assert len(ok) <= 1, (slot, ok)
    assert main(["turns", "list"]) == 0 and main(["replay", "--all"]) == 0


# Actors -----------------------------------------------------------------------
def test_a_guest_schedule_records_its_actor_fires_as_it_and_is_held_to_the_guest_quota(rt: Runtime, clock: ManualClock) -> None:
    from metnos.settings.actors import ActorsConfig, GuestPolicy

    guest = "guest_abc123"
    policy = ActorsConfig(guest=GuestPolicy(max_schedules=1))
    as_guest = ScheduleService(rt, actor=guest, policy=policy)
    base = {"target": {"kind": "executor", "name": "get_now"}, "cron": "*/5 * * * *", "channel": "none"}
    sid = as_guest.create(**base)["schedule_id"]
    with pytest.raises(SchedulerError, match=r"guest_abc123 already has 1 open schedules, the most \[actors.guest\] max_schedules allows \(1\)"):
        as_guest.create(**base)
    # The host's quota is its own.
    host_sid = ScheduleService(rt, policy=policy).create(**base)["schedule_id"]
    rows = {r["id"]: r.get("actor", "host") for r in ScheduleService(rt).list()}
    assert rows[sid] == guest and rows[host_sid] == "host"
    tick_at(rt, clock, at(8, 0, 1))
    callers = {s: [e for e in history(rt, s) if e["type"] == "FiringFinished"][0]["invocations"][0]["caller"] for s in (sid, host_sid)}
    assert callers[sid] == {"kind": "scheduler", "schedule_id": sid, "actor": guest}
    assert callers[host_sid] == {"kind": "scheduler", "schedule_id": host_sid}
    # A cancelled schedule no longer counts.
    as_guest.cancel(sid)
    assert as_guest.create(**base)["schedule_id"] != sid


def test_a_guest_schedule_fires_at_the_guests_autonomy_and_is_judged_as_the_guest(rt: Runtime, clock: ManualClock, home: Path) -> None:
    """[actors.guest] autonomy is read_only by default: a guest's schedule whose target has side effects runs
    nothing when it fires, approved or not; the vaglio refuses it as the guest's, at the guest's level."""
    guest = "guest_abc123"
    user = Path(os.environ["HOME"])
    write = {"target": {"kind": "executor", "name": "write_files"}, "cron": "*/5 * * * *", "channel": "none", "approved_by": "user:test"}
    sid = ScheduleService(rt, actor=guest).create(**write, args={"files": [{"path": str(user / "guest.txt"), "content": "guest"}]})["schedule_id"]
    host_sid = ScheduleService(rt).create(**write, args={"files": [{"path": str(user / "host.txt"), "content": "host"}]})["schedule_id"]
    looks = add(rt, target={"kind": "executor", "name": "get_now"})
    looks_as_guest = ScheduleService(rt, actor=guest).create(target={"kind": "executor", "name": "get_now"}, cron="*/5 * * * *",
                                                               channel="none")["schedule_id"]
    tick_at(rt, clock, at(8, 0, 1))
    [fired] = [e for e in history(rt, sid) if e["type"] == "FiringFinished"]
    assert not fired["ok"] and fired["invocations"] == [] and not (user / "guest.txt").exists()
    verdict = fired["error"]["verdict"]
    assert (verdict["principal"], verdict["blocked_by"], verdict["decision"]) == (guest, "autonomy", "deny")
    assert "read_only" in fired["error"]["message"]
    # The host's, the same but its own, runs; what only looks runs for the guest too, as the guest.
    assert [e["ok"] for e in history(rt, host_sid) if e["type"] == "FiringFinished"] == [True] and (user / "host.txt").read_text() == "host"
    assert all(e["ok"] for s in (looks, looks_as_guest) for e in history(rt, s) if e["type"] == "FiringFinished")
    [looked] = [e for e in history(rt, looks_as_guest) if e["type"] == "FiringFinished"]
    assert looked["invocations"][0]["caller"] == {"kind": "scheduler", "schedule_id": looks_as_guest, "actor": guest}


# Words the rules cannot read ----------------------------------------------------
def test_words_the_rules_cannot_read_are_asked_of_the_model_and_its_cron_is_checked(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    from metnos.services import wiring
    from tests.support.scripted_llm import ScriptedLLM, text

    words = "whenever the fortnightly book club meets, friday evenings at eight"
    # Without a model the rules' refusal stands, naming the shapes they know.
    with pytest.raises(SchedulerError, match="cannot read a schedule from"):
        ScheduleService(rt).read_when(words)
    script = [text('Sure: ```json\n{"cron": "0 20 * * 5", "once": false}\n```'), text('{"cron": "0 25 * * 5", "once": false}'),
              text('{"cron": null, "once": false}')]
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        router = wiring.llm_router(rt.workspace)
        try:
            service = ScheduleService(rt, models=router.for_tier)
            reading = service.read_when(words)
            # croniter refuses hour 25: the model's answer is named, nothing is read.
            with pytest.raises(SchedulerError, match=r"the model read .* as '0 25 \* \* 5', which is not a valid cron"):
                service.read_when(words)
            with pytest.raises(SchedulerError, match="cannot read a schedule from"):
                service.read_when("the colour of the sea")
        finally:
            router.close()
    assert (reading["cron"], reading["count"], reading["read_by"]) == ("0 20 * * 5", None, "model")
    # START is Wednesday 1 May 2030: the next three Fridays at eight in the evening.
    assert reading["next_fires"] == [stamp(at(20, day=3)), stamp(at(20, day=10)), stamp(at(20, day=17))]
    assert len(llm.requests) == 3 and words in llm.requests[0].messages[-1]["content"]
    # Words the rules read never reach the model.
    assert "read_by" not in ScheduleService(rt, models=router.for_tier).read_when("every morning at 8")


def test_modify_reads_words_the_rules_cannot_read_as_add_does_asking_the_model_once(
        home: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from metnos.services import schedules
    from tests.support.scripted_llm import ScriptedLLM, text

    clock_file = tmp_path / "now"
    clock_file.write_text(stamp(START))
    monkeypatch.setenv(CLOCK_FILE_ENV, str(clock_file))
    words = "whenever the fortnightly book club meets, friday evenings at eight"
    capsys.readouterr()
    assert main(["schedule", "add", "--cron", "*/5 * * * *", "--executor", "get_now", "--channel", "none"]) == 0
    sid = orjson.loads(capsys.readouterr().out)["schedule_id"]
    # One answer only: the words are read once, shown, confirmed, and that reading is what is recorded.
    with ScriptedLLM([text('{"cron": "0 20 * * 5", "once": false}'), text('{"cron": "30 7 * * 1", "once": false}')]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code = main(["schedule", "modify", sid, words, "--yes"])
        out = capsys.readouterr()
        assert code == 0, out.err
        assert orjson.loads(out.out)["cron"] == "0 20 * * 5" and "reads as cron '0 20 * * 5'" in out.err
        assert len(llm.requests) == 1 and words in llm.requests[0].messages[-1]["content"]
        # The service, given the words alone, reads them as add does: the rules, dateparser, then the model.
        row = schedules.modify(sid, {}, when=words)
    assert row["cron"] == "30 7 * * 1" and len(llm.requests) == 2
    assert [e["changes"] for e in history_of(sid) if e["type"] == "ScheduleModified"] == [{"cron": "0 20 * * 5"}, {"cron": "30 7 * * 1"}]


def history_of(sid: str) -> list[dict]:
    from metnos.services import schedules

    return schedules.act("history", sid)["events"]


def test_a_mnest_marked_private_is_the_hosts_and_a_guest_turn_does_not_read_it(rt: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    from uuid import UUID

    from metnos.runtime.turn.ports import LivePorts

    # The seeds' mnest from find_files to read_files, in the log on disk; then marked private from the CLI.
    [key] = [k for k, m in rt.mnestome.catch_up(rt.log)["mnests"].items()
             if (m["src_executor"], m["dst_executor"]) == ("find_files", "read_files")]

    def ports(principal: str) -> LivePorts:
        rt.refresh()
        return LivePorts(runtime=rt, router=None, approver=lambda *a: (False, "none"), clock=rt.clock, ids=rt.ids, principal=principal)

    assert key in ports("guest_abc123")._mnestome()["mnests"]
    assert main(["mnestome", "private", "find_files", "read_files"]) == 0
    assert "private (left out of a guest's turn)" in capsys.readouterr().out
    assert key not in ports("guest_abc123")._mnestome()["mnests"]
    assert ports("host")._mnestome()["mnests"][key]["private"] is True
    marked = [type(e).__name__ for e in rt.log.events.get(UUID(key))]
    assert marked[-1] == "MnestMarkedPrivate"
    # Shared again, a guest reads it.
    assert main(["mnestome", "private", "find_files", "read_files", "--undo"]) == 0
    assert key in ports("guest_abc123")._mnestome()["mnests"]
