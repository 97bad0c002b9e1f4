"""Issue 16 item 7: every side effect passes the same gate, builtins and firings too.

A schedule whose target has side effects is approved when it is created (in
the turn, through the same approval an executor's call gets), and each firing
runs only the target and arguments that were approved. The attacks: a model
that, refused a deletion, schedules it instead; a stored template changed
after the approval; a firing asked to run other arguments; a run-now of a
schedule nobody approved (as today's main could leave behind).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from uuid import UUID

import orjson
import pytest

from domain.schedule import Schedule
from metnos.adapters.cli import main
from metnos.runtime.booted import Runtime
from metnos.runtime.scheduler import firing
from metnos.runtime.scheduler.clock import ManualClock
from domain.due import stamp
from metnos.runtime.scheduler.service import ScheduleService, SchedulerError
from metnos.runtime.scheduler.tick import Scheduler
from metnos.settings.workspace import Workspace
from tests.support.scripted_llm import ScriptedLLM, call, text

START = datetime(2030, 5, 1, 7, 58, 30, tzinfo=timezone.utc)


def ask(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["ask", *argv, "--json"])
    return code, orjson.loads(capsys.readouterr().out)


def events_of(capsys, aggregate_id: str) -> list[dict]:
    capsys.readouterr()
    main(["events", "--json", "--aggregate", aggregate_id])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def kind(event: dict) -> str:
    return event["topic"].rsplit(".", 1)[-1]


def schedules(capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["schedule", "list", "--json"]) == 0
    return orjson.loads(capsys.readouterr().out)


@pytest.fixture
def victim(home: Path) -> Path:
    f = home / "precious.txt"
    f.write_text("keep me")
    return f


def _delete_then_schedule(victim: Path) -> list:
    return [
        call("delete_files", {"paths": [str(victim)]}),
        call("schedule_recurring", {"executor": "delete_files", "args": {"paths": [str(victim)]}, "cron": "0 * * * *"}),
        text("done"),
    ]


def test_a_declined_turn_leaves_no_schedule_behind(home: Path, victim: Path, capsys, monkeypatch) -> None:
    with ScriptedLLM(_delete_then_schedule(victim)) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, "delete precious.txt, and every hour from now on", "--no")
        tool_messages = [m for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]
    # Nothing was done: the turn is refused, not answered.
    assert code == 3 and out["status"] == "refused", out
    assert "schedule_recurring was not approved" in out["failure"]["message"]
    assert schedules(capsys) == []
    assert victim.read_text() == "keep me"
    events = events_of(capsys, out["turn_id"])
    asked = [e["state"] for e in events if kind(e) == "ApprovalAsked"]
    assert [a["executor"] for a in asked] == ["delete_files", "schedule_recurring"]
    assert "delete_files" in asked[1]["reason"]
    assert "BuiltinCalled" not in [kind(e) for e in events]
    assert "declined" in tool_messages[1]["content"]


def test_a_chain_that_ends_in_a_deletion_asks_too(home: Path, victim: Path, capsys, monkeypatch) -> None:
    chain = [{"executor": "find_files", "args": {"root": str(home), "pattern": "*.txt"}},
             {"executor": "delete_files", "args": {"from_step": 1}}]
    with ScriptedLLM([call("schedule_recurring", {"chain": chain, "cron": "0 * * * *"}), text("done")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, "find my txt files and delete them every hour", "--no")
    assert code == 3 and out["status"] == "refused", out
    assert schedules(capsys) == []
    asked = [e["state"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "ApprovalAsked"]
    assert [a["executor"] for a in asked] == ["schedule_recurring"] and "delete_files" in asked[0]["reason"]
    assert victim.read_text() == "keep me"


def test_an_approved_schedule_records_its_approval_with_the_turn(home: Path, victim: Path, capsys, monkeypatch) -> None:
    script = [call("schedule_recurring", {"executor": "delete_files", "args": {"paths": [str(victim)]}, "cron": "0 * * * *"}),
              text("scheduled")]
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code, out = ask(capsys, "delete precious.txt every hour", "--yes")
    assert code == 0, out
    [row] = schedules(capsys)
    history = events_of(capsys, row["id"])
    # The turn's schedule was shown back and confirmed too (issue 37 item 1), under the same --yes.
    assert [kind(e) for e in history] == ["ScheduleCreated", "ScheduleApproved", "ScheduleConfirmed"]
    assert history[2]["state"]["by"] == "flag:--yes" and len(history[2]["state"]["next_fires"]) == 3
    approved = history[1]["state"]
    assert approved["by"] == "flag:--yes" and approved["turn_id"] == out["turn_id"]
    assert approved["executors"] == ["delete_files"]


def _approved_delete(rt: Runtime, victim: Path) -> str:
    return ScheduleService(rt).create(target={"kind": "executor", "name": "delete_files"}, args={"paths": [str(victim)]},
                                      cron="0 * * * *", channel="none", approved_by="test:user")["schedule_id"]


@pytest.fixture
def other(home: Path) -> Path:
    f = home / "other.txt"
    f.write_text("also precious")
    return f


def test_a_tampered_template_is_refused_at_firing(home: Path, victim: Path, other: Path) -> None:
    clock = ManualClock(START)
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        sid = _approved_delete(rt, victim)
        # Written to the log behind the service's back: no new approval.
        schedule = rt.log.repository.get(UUID(sid))
        schedule.modify(changes={"args": {"paths": [str(other)]}}, by="attacker", since=stamp(clock()), at=clock())
        rt.log.save(schedule)
        clock.set(datetime(2030, 5, 1, 8, 0, 1, tzinfo=timezone.utc))
        report = Scheduler(rt).tick().to_json()
    assert not report["errors"], report
    [fired] = report["firings"]
    assert (fired["ok"], fired["kind"], fired["invocation_ids"]) == (False, "NotApproved", [])
    assert other.read_text() == "also precious" and victim.read_text() == "keep me"


def test_a_firing_with_other_arguments_is_refused(home: Path, victim: Path, other: Path) -> None:
    clock = ManualClock(START)
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        sid = _approved_delete(rt, victim)
        schedule = rt.log.repository.get(UUID(sid))
        attempt = firing.run_target(rt, sid, schedule.target, {"paths": [str(other)]}, clock(), approval=schedule.approval)
        assert (attempt.ok, attempt.kind, attempt.invocations) == (False, "NotApproved", [])
        assert "other than the ones approved" in attempt.error["message"]
        # Another executor under the same approval is refused the same way.
        attempt = firing.run_target(rt, sid, {"kind": "executor", "name": "move_files"}, schedule.args, clock(), approval=schedule.approval)
        assert (attempt.ok, attempt.kind) == (False, "NotApproved")
        # Within the approval it runs.
        attempt = firing.run_target(rt, sid, schedule.target, schedule.args, clock(), approval=schedule.approval)
        assert attempt.ok, attempt
    assert other.read_text() == "also precious" and not victim.exists()


def test_run_now_of_an_unapproved_schedule_is_refused(home: Path, victim: Path, capsys) -> None:
    clock = ManualClock(START)
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        # What a builtin on the old main left in the log: created, never approved.
        schedule = Schedule.create(
            id=rt.ids(), at=clock(), since=stamp(clock()), target={"kind": "executor", "name": "delete_files"},
            args={"paths": [str(victim)]}, cron="0 * * * *", timezone="UTC", channel="none", count=None, expiry=None,
            on_failure="notify", max_consecutive_failures=3, paused=False, grace_s=900, label="", owner="user",
        )
        rt.log.save(schedule)
        sid = str(schedule.id)
        with pytest.raises(SchedulerError, match="never approved"):
            ScheduleService(rt).run_now(sid)
    capsys.readouterr()
    code = main(["schedule", "run-now", sid])
    err = capsys.readouterr().err
    assert code != 0
    assert "run-now refused" in err and "delete_files" in err and "never approved" in err
    assert "Traceback" not in err
    assert victim.read_text() == "keep me"
    # Nor does its cadence run it.
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        clock.set(datetime(2030, 5, 1, 8, 0, 1, tzinfo=timezone.utc))
        report = Scheduler(rt).tick().to_json()
    assert [(f["ok"], f["kind"]) for f in report["firings"]] == [(False, "NotApproved")]
    assert victim.read_text() == "keep me"


def test_a_schedule_with_side_effects_needs_an_approval_to_exist(home: Path, victim: Path) -> None:
    with Runtime.boot(Workspace.from_env(), birth=False, clock=ManualClock(START)) as rt:
        service = ScheduleService(rt)
        with pytest.raises(SchedulerError, match="must be approved"):
            service.create(target={"kind": "executor", "name": "delete_files"}, args={"paths": [str(victim)]}, cron="0 * * * *")
        assert service.list() == []
        sid = _approved_delete(rt, victim)
        with pytest.raises(SchedulerError, match="new approval"):
            service.modify(sid, {"args": {"paths": [str(home / "x")]}})
        # A schedule that only reads needs none.
        assert service.create(target={"kind": "executor", "name": "get_now"}, cron="0 * * * *")["schedule_id"]
