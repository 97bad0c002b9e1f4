"""A scheduler tick over 10,000 schedules: the next-fire index against a naive loop.

Builds a fresh workspace, records 10,000 schedules (mostly daily at a random
minute, some every five minutes; their target is a no-op builtin callback so
no sandbox time is measured), folds the schedule store, then measures in the
same run:

* an idle tick (nothing due): lock, store lookup, bisect on the index;
* the baseline: the same decision by asking cron about every schedule
  (``due()`` from each cursor), what a scheduler without the index does;
* a busy tick that fires the schedules due in one minute (each firing two
  durable commits: FiringStarted, then FiringFinished).

Usage: python bench/scheduler_tick.py [N]
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from domain.schedule import Schedule  # noqa: E402
from metnos.runtime.scheduler import callbacks  # noqa: E402
from metnos.runtime.scheduler.callbacks import CallbackResult  # noqa: E402
from metnos.runtime.scheduler.clock import ManualClock  # noqa: E402
from domain.due import due, stamp  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    root = Path(tempfile.mkdtemp(prefix="bench-sched-", dir=os.environ.get("BENCH_DIR")))
    os.environ["METNOS_HOME"] = str(root / "home")
    os.environ["HOME"] = str(root / "user")
    (root / "user").mkdir()
    from metnos.adapters.cli import main as cli
    from metnos.runtime.booted import Runtime
    from metnos.runtime.scheduler.tick import Scheduler
    from metnos.settings.workspace import Workspace

    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        cli(["init"])

    callbacks.register("bench_noop")(lambda ctx, args: CallbackResult(ok=True, output={"ok": True}))
    start = datetime(2030, 5, 1, 0, 0, 30, tzinfo=timezone.utc)
    clock = ManualClock(start)
    rng = random.Random(8)
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as rt:
        t0 = time.perf_counter()
        batch = []
        for i in range(n):
            cron = "*/5 * * * *" if i % 100 == 0 else f"{rng.randrange(60)} {rng.randrange(24)} * * *"
            batch.append(Schedule.create(
                id=UUID(int=i + 1), at=start, since=stamp(start), target={"kind": "callback", "key": "bench_noop"}, args={},
                cron=cron, timezone="UTC", channel="none", count=None, expiry=None, on_failure="skip",
                max_consecutive_failures=None, paused=False, grace_s=900, label="", owner="builtin"))
            if len(batch) == 1000:
                rt.log.save(*batch)
                batch = []
        if batch:
            rt.log.save(*batch)
        recorded = time.perf_counter() - t0
        t0 = time.perf_counter()
        state = rt.schedules.catch_up(rt.log)
        folded = time.perf_counter() - t0
        size = len(rt.schedules.state_bytes())
        print(f"schedules: {n}; recorded in {recorded:.2f} s; store folded in {folded:.2f} s ({size / 1e6:.1f} MB)")

        scheduler = Scheduler(rt)
        clock.set(datetime(2030, 5, 1, 0, 1, 0, tzinfo=timezone.utc) + timedelta(seconds=1))
        # Warm: fires the minute-0/1 schedules, so the idle ticks below have nothing due.
        scheduler.tick()
        reps = 200
        t0 = time.perf_counter()
        for _ in range(reps):
            report = scheduler.tick()
            assert not report.firings and not report.errors
        idle = (time.perf_counter() - t0) / reps

        now = clock()
        rows = list(rt.schedules.state()["schedules"].values())
        base_reps = 3
        t0 = time.perf_counter()
        for _ in range(base_reps):
            owed = sum(1 for s in rows if due(s["cron"], s["timezone"], s["cursor"], now, grace_s=s["grace_s"]).fire)
        baseline = (time.perf_counter() - t0) / base_reps
        assert owed == 0, owed

        # A busy minute: every schedule due at 00:05 (the */5 ones plus the daily ones at 00:05).
        clock.set(datetime(2030, 5, 1, 0, 5, 1, tzinfo=timezone.utc))
        t0 = time.perf_counter()
        report = scheduler.tick()
        busy = time.perf_counter() - t0
        fired = len(report.firings)
        assert not report.errors

    print(f"idle tick (index):     {idle * 1e3:8.3f} ms  -> {1 / idle:9.1f} ticks/s")
    print(f"baseline (cron each):  {baseline * 1e3:8.3f} ms  -> {1 / baseline:9.1f} ticks/s")
    print(f"ratio index/baseline:  {baseline / idle:8.1f}x")
    print(f"busy tick: {fired} firings in {busy:.3f} s ({busy / max(fired, 1) * 1e3:.2f} ms a firing, callback target, durable commits)")


if __name__ == "__main__":
    main()
