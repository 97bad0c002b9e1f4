"""The runtime's own cost per step, without the model's time and the executor's body.

    python bench/turn_runtime.py [--turns 200] [--steps 5] [--by-rule]

Each step goes through the whole loop (guards, shape FSM, piping, schema,
sandbox policy check, vaglio, scratchpad decision, events); the turn's events
are committed durably to the LMDB log, at its opening and at its close
(docs/architecture.md, "The log's write path"). The model and the executors answer at once.
Printed against a baseline measured in the same run: one durable LMDB commit
of the same number of events per step (what any recorded step must pay).
The sandbox spawn (bench/sandbox_spawn.py) comes on top of this. ``--by-rule``
also prints the time each rule of the loop (metnos/runtime/turn/rules) took a
step, each wrapped in ``Timed``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lmdb  # noqa: E402
import orjson  # noqa: E402

from bench._turns import InstantPorts, fresh_workspace, script, turn_loop  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--by-rule", action="store_true", help="time each rule of the loop too")
    args = parser.parse_args()
    root = fresh_workspace("metnos-bench-turn-")
    try:
        from metnos.runtime.booted import Runtime
        from metnos.runtime.turn.loop import TurnRequest
        from metnos.runtime.turn.rules import Timed, default_rules

        env = dict(os.environ)
        with Runtime.boot(birth=False) as rt:
            per_step = []
            events_per_step = []
            # The durable writes (the log's writes: encoding, LMDB puts and the
            # fsync of the commit), timed apart: on a loaded machine the fsync
            # alone swings by 10x. A turn's saves are held in its unit of work
            # and written at its commits, so the write is timed, not the save.
            saving = [0.0]
            real_write = rt.log._write

            def timed_write(*args, **kwargs):
                started = time.perf_counter()
                try:
                    return real_write(*args, **kwargs)
                finally:
                    saving[0] += time.perf_counter() - started

            rt.log._write = timed_write
            # The turn's lease is made durable (a directory fsync) once a turn: I/O too, timed with the save.
            from metnos.runtime import lease as lease_module

            real_take = lease_module.TurnLease.take.__func__

            def timed_take(cls, *a, **kw):
                started = time.perf_counter()
                try:
                    return real_take(cls, *a, **kw)
                finally:
                    saving[0] += time.perf_counter() - started

            lease_module.TurnLease.take = classmethod(timed_take)
            save_per_step = []
            by_rule: dict[str, dict[str, float]] = {}
            for _ in range(args.turns):
                saving[0] = 0.0
                ports = InstantPorts(rt, script(args.steps))
                rules = [Timed(r, by_rule.setdefault(r.name, defaultdict(float))) for r in default_rules()] if args.by_rule else None
                loop = turn_loop(rt, ports, env, rules)
                before = rt.log.recorder.max_notification_id() or 0
                started = time.perf_counter()
                outcome = loop.run(TurnRequest(text="read my notes and tell me what they say"))
                elapsed = time.perf_counter() - started
                assert outcome.status == "answered", outcome
                per_step.append(elapsed / args.steps)
                save_per_step.append(saving[0] / args.steps)
                events_per_step.append(((rt.log.recorder.max_notification_id() or 0) - before) / args.steps)
        ours_ms = statistics.median(per_step) * 1000
        save_ms = statistics.median(save_per_step) * 1000
        own_ms = statistics.median(a - b for a, b in zip(per_step, save_per_step)) * 1000
        n_events = round(statistics.median(events_per_step))

        env_raw = lmdb.open(str(root / "raw"), map_size=1 << 30, sync=True, metasync=True)
        value = orjson.dumps({"kind": "StepRecorded", "args": {"paths": ["~/note.md"]}, "step": 1})
        samples = []
        key = 0
        for _ in range(args.turns):
            started = time.perf_counter()
            with env_raw.begin(write=True) as txn:
                for _ in range(n_events):
                    key += 1
                    txn.put(key.to_bytes(8, "big"), value, append=True)
            samples.append(time.perf_counter() - started)
        env_raw.close()
        raw_ms = statistics.median(samples) * 1000
        print(f"runtime cost per step (median over {args.turns} turns x {args.steps} steps): {ours_ms:.2f} ms")
        print(f"baseline: one durable LMDB commit of {n_events} events:                 {raw_ms:.2f} ms")
        print(f"ratio ours/baseline: {ours_ms / raw_ms:.1f}   beyond the baseline: {ours_ms - raw_ms:.2f} ms   target: under 5 ms a step")
        print(f"of which the durable writes (the log's writes: encoding, LMDB, fsync; the turn lease's fsync): {save_ms:.2f} ms;"
              f" the rest of the runtime's own work: {own_ms:.2f} ms a step (target: under 2.2 ms)")
        if args.by_rule:
            # A rule's time includes any step it runs itself (pipeline_shape's remediation, grounded's working out).
            print("time a step in each rule (mean over all turns, each point the rule looks at):")
            for name, points in by_rule.items():
                looks = {rule.name: type(rule).__dict__ for rule in default_rules()}[name]
                spent = "  ".join(f"{point} {seconds * 1000 / (args.turns * args.steps):.3f} ms" for point, seconds in points.items() if point in looks)
                print(f"  {name:<20} {sum(points.values()) * 1000 / (args.turns * args.steps):.3f} ms   {spent}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
