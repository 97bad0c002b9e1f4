"""``metnos daemon``: the scheduler loop, one tick every 60 seconds (seeds/002 ch. 11.2).

At start it installs the builtin maintenance jobs that are missing, then
ticks: each tick fires what is due and prints one JSON line with what it
did. A tick's own failures are printed and the loop goes on.
"""

from __future__ import annotations

import argparse
import sys
import time

import orjson

from metnos.errors import MetnosError
from metnos.workspace import Workspace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("daemon", help="run the scheduler loop")
    p.add_argument("--tick", type=float, default=60.0, help="seconds between ticks (default 60)")
    p.add_argument("--once", action="store_true", help="run one tick and exit")
    p.add_argument("--skip-birth", action="store_true", help="skip the executors' birth tests at start (signatures are still checked)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from metnos.runtime import Runtime
    from metnos.scheduler.clock import clock_from_env
    from metnos.scheduler.service import ScheduleService
    from metnos.scheduler.tick import Scheduler

    if args.tick <= 0:
        raise MetnosError("--tick must be a positive number of seconds")
    clock = clock_from_env()
    # The daemon runs every birth at its start; commands reuse what it found.
    with Runtime.boot(Workspace.from_env(), birth=not args.skip_birth, reuse_births=False, clock=clock) as rt:
        installed = ScheduleService(rt).install_builtin_jobs()
        # Turns left open by a writer that is gone were closed as abandoned at boot.
        _emit({"event": "started", "installed": installed, "abandoned": rt.orphans.closed})
        scheduler = Scheduler(rt)
        while True:
            started = time.monotonic()
            try:
                report = scheduler.tick().to_json()
            except Exception as e:  # noqa: BLE001 - the loop must not fall (seeds/002 ch. 11.2)
                report = {"error": f"{type(e).__name__}: {e}"}
            _emit({"event": "tick", **report})
            if args.once:
                return 0
            time.sleep(max(0.0, args.tick - (time.monotonic() - started)))


def _emit(record: dict) -> None:
    sys.stdout.write(orjson.dumps(record, default=str).decode() + "\n")
    sys.stdout.flush()
