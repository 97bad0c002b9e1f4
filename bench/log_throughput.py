"""How fast the log writes and reads, as ratios against baselines of the same run.

    python bench/log_throughput.py [--scan-events 100000] [--saves 300]

(a) one event per save, durable          vs raw LMDB put+commit (sync) and eventsourcing's SQLite recorder
(b) a turn-sized save of 20 events, durable   vs raw LMDB 20 puts per sync commit and SQLite
(c) the same 20-event saves without fsync      vs raw LMDB without sync
(d) a full scan decoded into domain events      vs raw LMDB cursor scan with orjson.loads

"ours" goes through the whole eventsourcing Application path (aggregate ->
mapper -> orjson transcoder -> zstd compressor -> LMDB recorder), so the
ratio is what a Metnos turn pays over bare LMDB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import uuid4

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lmdb  # noqa: E402
import orjson  # noqa: E402
from eventsourcing.application import Application  # noqa: E402

from domain.base import Created, DomainEvent, MetnosAggregate  # noqa: E402
from metnos.mechanisms.eventlog import EventLog  # noqa: E402
from metnos.mechanisms.store import environment as environments  # noqa: E402
from metnos.settings.workspace import Workspace  # noqa: E402

T0 = datetime(2026, 11, 22, 8, 0, tzinfo=timezone.utc)
STEP = {"executor": "read_files", "version": "1.0.0", "args": {"paths": ["~/notes/diary.md"]}, "step": 3, "digest": "blake3:" + "ab" * 32}


class BenchTurn(MetnosAggregate):
    class Started(Created):
        text: str

    class StepRecorded(DomainEvent):
        executor: str
        version: str
        args: dict
        step: int
        digest: str

    def __init__(self, text: str) -> None:
        self.text = text


def make_turn(n_events: int, clock: list[datetime]) -> BenchTurn:
    clock[0] += timedelta(milliseconds=1)
    turn = BenchTurn._create(BenchTurn.Started, id=uuid4(), text="read my diary", timestamp=clock[0])
    for _ in range(n_events - 1):
        clock[0] += timedelta(microseconds=10)
        turn.trigger_event(BenchTurn.StepRecorded, timestamp=clock[0], **STEP)
    return turn


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def bench_ours(root: Path, saves: int, per_save: int, sync: bool) -> float:
    home = root / f"ours-{per_save}-{sync}"
    log = EventLog(Workspace(home / "data", home / "config"), env={"LMDB_SYNC": "yes" if sync else "no"})
    clock = [T0]
    turns = [make_turn(per_save, clock) for _ in range(saves)]
    start = time.perf_counter()
    for turn in turns:
        log.save(turn)
    elapsed = time.perf_counter() - start
    log.close()
    return rate(saves * per_save, elapsed)


def bench_raw(root: Path, saves: int, per_save: int, sync: bool) -> float:
    path = root / f"raw-{per_save}-{sync}"
    env = lmdb.open(str(path), map_size=1 << 30, sync=sync, metasync=sync)
    value = orjson.dumps({"timestamp": T0.isoformat(), **STEP})
    key = 0
    start = time.perf_counter()
    for _ in range(saves):
        with env.begin(write=True) as txn:
            for _ in range(per_save):
                key += 1
                txn.put(key.to_bytes(8, "big"), value, append=True)
    elapsed = time.perf_counter() - start
    env.close()
    return rate(saves * per_save, elapsed)


def bench_sqlite(root: Path, saves: int, per_save: int) -> float:
    db = root / f"es-sqlite-{per_save}.db"
    app = Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(db)})
    clock = [T0]
    turns = [make_turn(per_save, clock) for _ in range(saves)]
    start = time.perf_counter()
    for turn in turns:
        app.save(turn)
    elapsed = time.perf_counter() - start
    app.close()
    return rate(saves * per_save, elapsed)


def bench_scan(root: Path, total: int) -> tuple[float, float]:
    home = root / "scan"
    log = EventLog(Workspace(home / "data", home / "config"), env={"LMDB_SYNC": "no"})
    clock = [T0]
    per_turn = 20
    for _ in range(total // per_turn):
        log.save(make_turn(per_turn, clock))
    start = time.perf_counter()
    count = 0
    for _ in log.domain_events():
        count += 1
    ours = rate(count, time.perf_counter() - start)
    log.close()

    path = root / "raw-scan"
    env = lmdb.open(str(path), map_size=1 << 30, sync=False)
    value = orjson.dumps({"timestamp": T0.isoformat(), **STEP})
    with env.begin(write=True) as txn:
        for key in range(1, total + 1):
            txn.put(key.to_bytes(8, "big"), value, append=True)
    start = time.perf_counter()
    raw_count = 0
    with env.begin() as txn, txn.cursor() as cursor:
        for _, v in cursor:
            orjson.loads(v)
            raw_count += 1
    raw = rate(raw_count, time.perf_counter() - start)
    env.close()
    assert raw_count == count == total, (raw_count, count, total)
    return ours, raw


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--saves", type=int, default=300)
    parser.add_argument("--scan-events", type=int, default=100_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="metnos-bench-", dir=os.environ.get("BENCH_DIR")))
    try:
        rows = []
        for label, per_save, sync in (("(a) 1 event/save, durable", 1, True), ("(b) 20 events/save, durable", 20, True), ("(c) 20 events/save, no fsync", 20, False)):
            saves = args.saves if sync else args.saves * 10
            ours = bench_ours(root, saves, per_save, sync)
            raw = bench_raw(root, saves, per_save, sync)
            sqlite = bench_sqlite(root, saves, per_save) if sync else None
            rows.append((label, ours, raw, sqlite))
        print(f"{'case':<32} {'ours ev/s':>11} {'raw LMDB':>11} {'ours/raw':>9} {'ES SQLite':>11} {'ours/SQLite':>12}")
        for label, ours, raw, sqlite in rows:
            sq = f"{sqlite:>11,.0f} {ours / sqlite:>12.2f}" if sqlite else f"{'-':>11} {'-':>12}"
            print(f"{label:<32} {ours:>11,.0f} {raw:>11,.0f} {ours / raw:>9.2f} {sq}")
        ours, raw = bench_scan(root, args.scan_events)
        print(f"{'(d) scan ' + format(args.scan_events, ',') + ' -> domain events':<32} {ours:>11,.0f} {raw:>11,.0f} {ours / raw:>9.2f} {'-':>11} {'-':>12}")
        print("targets: (b) ours/raw >= 0.5, (d) ours/raw >= 0.25")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        _ = environments


if __name__ == "__main__":
    main()
