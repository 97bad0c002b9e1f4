"""Replay and rebuild speed, as ratios against baselines of the same run.

    python bench/replay_rebuild.py [--turns 1000] [--events 1000000]

(a) replay of N recorded turns (turns per second); the turns are recorded by
    the real loop with a model and executors that answer at once; baseline:
    reading the same turns' events back from the log (no replay).
(b) rebuild of all projections over a log of M events (events per second), in
    one process and with the default workers (one per core on a big log);
    baseline: a raw LMDB cursor scan of M records with orjson.loads. Best of
    three interleaved rounds of each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lmdb  # noqa: E402
import orjson  # noqa: E402

from bench._turns import InstantPorts, fresh_workspace, script, turn_loop  # noqa: E402


def record_turns(rt, n: int, env: dict) -> list[str]:
    from metnos.runtime.turn.loop import TurnRequest

    ids = []
    for i in range(n):
        ports = InstantPorts(rt, script(1 + i % 4))
        outcome = turn_loop(rt, ports, env).run(TurnRequest(text="read my notes and tell me what they say"))
        ids.append(outcome.turn_id)
    return ids


def bench_replay(rt, ids: list[str], env: dict) -> tuple[float, float]:
    from replay.replayer import Replayer

    replayer = Replayer(rt, env=env)
    started = time.perf_counter()
    for turn_id in ids:
        result = replayer.replay(turn_id)
        assert result.same_path, result.divergence
    ours = len(ids) / (time.perf_counter() - started)
    started = time.perf_counter()
    for turn_id in ids:
        replayer.recorded(turn_id)
    baseline = len(ids) / (time.perf_counter() - started)
    return ours, baseline


def fill_log(rt, total: int) -> int:
    """Turn and invocation events in the proportions a real turn has, saved a turn at a time."""
    from domain.invocation import Invocation
    from domain.turn import Turn

    t = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)
    n = 0
    i = 0
    batch: list = []
    while n < total:
        i += 1
        t += timedelta(seconds=1)
        turn = Turn.start(id=UUID(int=10**12 + i), at=t, text="read my notes", actor="user", channel="cli", mode="local", settings={}, runtime_version="bench")
        turn.record(Turn.PrefilterRanked, at=t, ranking={"candidates": [{"name": "read_files", "score": 2.0}]}, prefilter_ms=0)
        turn.record(Turn.LLMAsked, at=t, round=1, tier="wise", request_digest="blake3:00", tools=["read_files"])
        turn.record(Turn.LLMReplied, at=t, round=1, reply={"text": "", "tool_calls": [{"id": "c", "name": "read_files", "arguments": {"paths": ["~/n.md"]}}], "call_form": "native", "raw": {}}, intent_ms=900)
        turn.record(Turn.StepProposed, at=t, step=1, call_id="c", executor="read_files", args={"paths": ["~/n.md"]}, call_form="native")
        turn.record(Turn.StepResolved, at=t, step=1, args={"paths": ["~/n.md"]}, pipings=[])
        turn.record(Turn.StepJudged, at=t, step=1, verdict={"decision": "allow", "score": 0.7}, vaglio_ms=0)
        inv = Invocation.request(id=UUID(int=2 * 10**12 + i), at=t, executor="read_files", version="1.0.0", origin="seed", digest="blake3:00",
                                 args={"paths": ["~/n.md"]}, args_hash="blake3:00", caller={"kind": "user"}, turn_id=str(turn.id), trace_id=str(turn.id))
        inv.complete(at=t, ok=True, kind="ok", exit_code=0, duration_ms=20, output_hash="blake3:00", output_size=40,
                     output={"ok": True, "content": "hello"}, error=None, stderr_tail="")
        turn.record(Turn.StepInvoked, at=t, step=1, invocation_id=str(inv.id), executor="read_files", version="1.0.0", digest="blake3:00", args_hash="blake3:00", ok=True, kind="ok", exec_ms=20)
        turn.record(Turn.ObservationRecorded, at=t, step=1, ok=True, observation={"ok": True, "content": "hello"}, spill={"spilled": False})
        turn.record(Turn.LLMAsked, at=t, round=2, tier="wise", request_digest="blake3:01", tools=["read_files"])
        turn.record(Turn.LLMReplied, at=t, round=2, reply={"text": "hello", "tool_calls": [], "call_form": "none", "raw": {}}, intent_ms=800)
        turn.record(Turn.TurnAnswered, at=t, text="hello", steps=1)
        batch.extend((turn, inv))
        n += 13 + 2
        if len(batch) >= 200:
            rt.log.save(*batch)
            batch.clear()
    if batch:
        rt.log.save(*batch)
    return rt.log.recorder.max_notification_id() or 0


def raw_log(root: Path, total: int) -> lmdb.Environment:
    """The baseline's log: ``total`` records of a small JSON event, one LMDB table."""
    env = lmdb.open(str(root / "raw-scan"), map_size=1 << 31, sync=False)
    value = orjson.dumps({"step": 1, "executor": "read_files", "args": {"paths": ["~/n.md"]}, "timestamp": "2026-11-22T08:00:00+00:00"})
    with env.begin(write=True) as txn:
        for key in range(1, total + 1):
            txn.put(key.to_bytes(8, "big"), value, append=True)
    return env


def raw_scan(env: lmdb.Environment) -> float:
    """Records per second of a cursor scan with orjson.loads of each."""
    started = time.perf_counter()
    count = 0
    with env.begin() as txn, txn.cursor() as cursor:
        for _, v in cursor:
            orjson.loads(v)
            count += 1
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["LMDB_SYNC"] = "no"
    root = fresh_workspace("metnos-bench-replay-")
    try:
        from metnos.runtime.booted import Runtime
        from replay.rebuild import default_workers, rebuild

        env = dict(os.environ)
        with Runtime.boot(birth=False) as rt:
            ids = record_turns(rt, args.turns, env)
            ours, baseline = bench_replay(rt, ids, env)
            print(f"(a) replay of {len(ids)} turns: {ours:,.0f} turns/s; reading their events back: {baseline:,.0f} turns/s; ratio {ours / baseline:.2f}")
            total = fill_log(rt, args.events)
            raw_env = raw_log(root, total)
            # Rounds interleave the baseline and the rebuilds, so a machine
            # that slows down for a while slows all of them; best of each.
            rates: dict[str, list[float]] = {"raw": []}
            for _round in range(args.rounds):
                rates["raw"].append(raw_scan(raw_env))
                for workers in (1, default_workers(rt.log, total)):
                    started = time.perf_counter()
                    sizes = rebuild(rt, workers=workers)
                    rates.setdefault(f"{workers} worker(s)", []).append(total / (time.perf_counter() - started))
            raw_env.close()
        raw = max(rates.pop("raw"))
        for label, runs in rates.items():
            print(f"(b) rebuild of {len(sizes)} projections over {total:,} events, {label}: {max(runs):,.0f} events/s "
                  f"(runs {min(runs):,.0f}-{max(runs):,.0f}); raw LMDB scan + orjson: {raw:,.0f} records/s; "
                  f"ratio {max(runs) / raw:.2f} (target >= 0.25)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
