"""Issue 6: a rebuild shared among worker processes: same bytes, progress, and clear failures."""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from uuid import UUID

import pytest

from replay import rebuild as rebuild_module
from replay.rebuild import PARALLEL_FROM, RebuildFailed, default_workers, rebuild, share_out


def record_turns(rt, count: int) -> None:
    """Turns and invocations as a live turn records them, enough to cross several progress reports."""
    from domain.invocation import Invocation
    from domain.turn import Turn

    t = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)
    batch = []
    for i in range(1, count + 1):
        t += timedelta(minutes=7)  # several days, so several daily line files
        turn = Turn.start(id=UUID(int=10**9 + i), at=t, text=f"read note {i}", actor="user", channel="cli", mode="local", settings={}, runtime_version="test")
        turn.record(Turn.LLMReplied, at=t, round=1, reply={"text": "", "tool_calls": [], "call_form": "native", "raw": {}}, intent_ms=i % 17)
        inv = Invocation.request(id=UUID(int=2 * 10**9 + i), at=t, executor="read_files", version="1.0.0", origin="seed", digest="blake3:00",
                                 args={"paths": [f"~/n{i}.md"]}, args_hash="blake3:00", caller={"kind": "user"}, turn_id=str(turn.id), trace_id=str(turn.id))
        inv.complete(at=t, ok=True, kind="ok", exit_code=0, duration_ms=3, output_hash="blake3:00", output_size=5,
                     output={"ok": True, "content": "hello"}, error=None, stderr_tail="")
        turn.record(Turn.StepInvoked, at=t, step=1, invocation_id=str(inv.id), executor="read_files", version="1.0.0", digest="blake3:00",
                    args_hash="blake3:00", ok=True, kind="ok", exec_ms=3)
        turn.record(Turn.TurnAnswered, at=t, text=f"note {i}", steps=1)
        batch.extend((turn, inv))
    rt.log.save(*batch)


@pytest.fixture
def runtime(home: Path):
    from metnos.runtime.booted import Runtime

    with Runtime.boot(birth=False) as rt:
        record_turns(rt, 1500)
        rt.refresh()
        yield rt


def test_workers_give_the_bytes_of_the_live_views_and_report_progress(runtime, monkeypatch) -> None:
    live = {name: view.state_bytes() for name, view in runtime.projections().items()}
    assert all(live.values())
    spawned: list[list[str]] = []
    real_popen = subprocess.Popen

    def counting_popen(argv, **kwargs):  # noqa: ANN001, ANN202
        spawned.append(argv[argv.index("replay.rebuild_worker") + 4:])
        return real_popen(argv, **kwargs)

    monkeypatch.setattr(rebuild_module.subprocess, "Popen", counting_popen)
    reports: list[tuple[str, int, int]] = []
    sizes = rebuild(runtime, workers=2, progress=lambda *report: reports.append(report))

    # This process folds the heaviest share; a worker process folds the other.
    own, other = share_out({name: view.fold.cost for name, view in runtime.projections().items()}, 2)
    assert spawned == [other]
    assert own == ["turn_lines", "turns"] and other == ["audit", "catalogue", "mnestome", "plans", "proposals", "schedules"]
    assert {name: view.state_bytes() for name, view in runtime.projections().items()} == live
    assert sizes == {name: len(data) for name, data in live.items()}
    head = runtime.log.recorder.max_notification_id()
    positions = [position for _label, position, _head in reports]
    assert positions == sorted(positions)
    # The bar moves with the slowest worker, while they fold, and ends at the head.
    assert any(0 < position < head for position in positions)
    assert positions[-1] == head
    # The views stand at the head: a catch-up finds nothing to fold.
    for view in runtime.projections().values():
        assert view.store.max_tracking_id("metnos") == head


def test_a_worker_whose_lines_arrive_in_one_read_still_moves_the_bar_step_by_step(runtime, monkeypatch) -> None:
    # CI's timing, made certain: the worker's positions reach this process only
    # after this process's own share is folded, all in one write.
    real_popen = subprocess.Popen

    def all_at_once(argv, **kwargs):  # noqa: ANN001, ANN202
        return real_popen(["sh", "-c", 'out=$("$@") || exit $?; printf "%s\\n" "$out"', "sh", *argv], **kwargs)

    monkeypatch.setattr(rebuild_module.subprocess, "Popen", all_at_once)
    reports: list[int] = []
    rebuild(runtime, workers=2, progress=lambda _label, position, _head: reports.append(position))
    head = runtime.log.recorder.max_notification_id()
    assert reports == sorted(reports)
    assert any(0 < position < head for position in reports), reports
    assert reports[-1] == head


def test_a_position_split_between_two_reads_is_read_whole(runtime, monkeypatch) -> None:
    from replay.rebuild import Workers

    real_popen = subprocess.Popen

    def split_line(argv, **kwargs):  # noqa: ANN001, ANN202
        return real_popen(["sh", "-c", "printf 12; sleep 0.3; printf '34\\n56'; sleep 0.3; printf '78\\n'"], **kwargs)

    monkeypatch.setattr(rebuild_module.subprocess, "Popen", split_line)
    workers = Workers(runtime.workspace, [["audit"]], 9999)
    seen: list[int] = []
    try:
        workers.wait(seen.append)
    finally:
        workers.kill()
    # The bar stands still between reads, so positions repeat; the ones it passed through:
    assert [position for i, position in enumerate(seen) if position and position not in seen[:i]] == [1234, 5678]


def test_a_worker_that_fails_is_one_line_naming_its_projections_and_the_cause(runtime, monkeypatch) -> None:
    live = {name: view.state_bytes() for name, view in runtime.projections().items()}
    # The worker reads the log settings from its environment; this process booted before.
    monkeypatch.setenv("PERSISTENCE_MODULE", "no.such.module")
    with pytest.raises(RebuildFailed) as failure:
        rebuild(runtime, ["audit", "turns"], workers=2)
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith("the rebuild worker for turns failed: ")
    assert "PERSISTENCE_MODULE='no.such.module' is not a usable persistence module" in message
    # This process's share was folded; the worker's view is empty until the next rebuild.
    assert runtime.audit.state_bytes() == live["audit"]
    assert runtime.turns.state_bytes() != live["turns"]
    monkeypatch.delenv("PERSISTENCE_MODULE")
    rebuild(runtime, ["audit", "turns"], workers=2)
    assert runtime.turns.state_bytes() == live["turns"]


def test_a_corrupt_record_stops_every_share_with_its_name(runtime) -> None:
    from metnos.mechanisms.store.errors import CorruptRecord

    recorder = runtime.log.recorder
    foreign = (recorder.max_notification_id() + 1).to_bytes(8, "big")
    recorder.shared.write(lambda txn: txn.put(foreign, b"\x07garbage", db=recorder._notifications_db))
    try:
        for workers in (2, 1):
            with pytest.raises(CorruptRecord, match="unknown record format 7") as failure:
                rebuild(runtime, ["audit", "turns"], workers=workers)
            assert foreign.hex() in str(failure.value)
    finally:
        recorder.shared.write(lambda txn: txn.delete(foreign, db=recorder._notifications_db))


def test_a_killed_worker_is_reported_and_a_second_rebuild_recovers(runtime, monkeypatch) -> None:
    live = {name: view.state_bytes() for name, view in runtime.projections().items()}
    real_popen = subprocess.Popen

    def killed_popen(argv, **kwargs):  # noqa: ANN001, ANN202
        worker = real_popen(argv, **kwargs)
        worker.kill()
        return worker

    monkeypatch.setattr(rebuild_module.subprocess, "Popen", killed_popen)
    with pytest.raises(RebuildFailed, match="killed by signal 9"):
        rebuild(runtime, workers=2)
    monkeypatch.setattr(rebuild_module.subprocess, "Popen", real_popen)
    rebuild(runtime, workers=2)
    assert {name: view.state_bytes() for name, view in runtime.projections().items()} == live


def test_folds_are_shared_out_costliest_first_to_the_lightest_worker_heaviest_share_first() -> None:
    costs = {"turn_lines": 4, "turns": 2, "audit": 2, "mnestome": 0, "schedules": 0, "catalogue": 0}
    assert share_out(costs, 2) == [["audit", "schedules", "turns"], ["catalogue", "mnestome", "turn_lines"]]
    assert share_out({"a": 1, "b": 5, "c": 1}, 2) == [["b"], ["a", "c"]]
    assert share_out({"a": 2, "b": 3, "c": 2}, 2) == [["a", "c"], ["b"]]
    assert share_out(costs, 1) == [sorted(costs)]
    assert share_out(costs, 0) == [sorted(costs)]
    assert sorted(map(tuple, share_out(costs, 10))) == sorted((name,) for name in costs)
    assert share_out({"turns": 2}, 4) == [["turns"]]


def test_only_a_big_lmdb_log_is_shared_among_processes(runtime) -> None:
    import os

    assert default_workers(runtime.log, PARALLEL_FROM - 1) == 1
    assert default_workers(runtime.log, PARALLEL_FROM) == len(os.sched_getaffinity(0))
    assert default_workers(SimpleNamespace(recorder=object()), PARALLEL_FROM * 10) == 1
