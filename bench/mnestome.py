"""How fast the mnestome folds and answers, as ratios against baselines of the same run.

    python bench/mnestome.py [--events 1000000] [--per-mnest 100] [--topk-mnests 100000]

(a) fold N Mnest events from an LMDB log into the mnestome view (decode +
    fold + one state write), vs a raw LMDB cursor scan with orjson.loads of
    N records of the same size;
(b) the same fold without the view (in-memory state), to split decoding
    from writing;
(c) top-k (k=20) over M mnests, overall and by tag, in milliseconds.

The events are real domain events: Mnest aggregates created and reinforced
through their commands, saved through the EventLog (mapper, orjson, zstd,
LMDB) without fsync, in batches of about 1,000 events.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lmdb  # noqa: E402
import orjson  # noqa: E402

from domain.mnest import Mnest, mnest_id, mnest_key  # noqa: E402
from metnos.mechanisms.eventlog import EventLog  # noqa: E402
from metnos.settings.workspace import Workspace  # noqa: E402
from projections.base import MaterialisedView  # noqa: E402
from projections.mnestome import MnestomeFold, top  # noqa: E402
from metnos.mechanisms.store.views import ViewStore  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
TAGS = ["invoice", "pdf", "photo", "email", "notes", "calendar", "music", "travel"]


def fill(log: EventLog, events: int, per_mnest: int) -> int:
    """Write ``events`` Mnest events; returns how many were written."""
    rng = random.Random(7)
    mnests = max(1, events // per_mnest)
    written = 0
    batch: list[Mnest] = []
    pending = 0
    for i in range(mnests):
        at = T0 + timedelta(minutes=i)
        m = Mnest.observe(src=f"read_src{i % 997}", src_version="1.0.0", dst=f"extract_dst{i}", dst_version="1.0.0",
                          uses=1, at=at, tags=rng.sample(TAGS, 2), turn_id=None)
        for _ in range(per_mnest - 1):
            at += timedelta(hours=rng.randint(1, 96))
            m.reinforce(uses=rng.randint(1, 3), at=at, turn_id=None)
        batch.append(m)
        pending += per_mnest
        if pending >= 1000:
            log.save(*batch)
            written += pending
            batch, pending = [], 0
    if batch:
        log.save(*batch)
        written += pending
    return written


def raw_scan_rate(root: Path, count: int, sample: bytes) -> float:
    env = lmdb.open(str(root / "raw"), map_size=1 << 32, sync=False, metasync=False)
    with env.begin(write=True) as txn:
        for key in range(1, count + 1):
            txn.put(key.to_bytes(8, "big"), sample, append=True)
    start = time.perf_counter()
    n = 0
    with env.begin() as txn, txn.cursor() as cursor:
        for _, v in cursor:
            orjson.loads(v)
            n += 1
    elapsed = time.perf_counter() - start
    env.close()
    assert n == count
    return n / elapsed


def synthetic_state(n: int) -> dict:
    rng = random.Random(11)
    mnests = {}
    for i in range(n):
        src, dst = f"read_s{i % 5003}", f"extract_d{i}"
        mid = str(mnest_id(src, "1.0.0", dst, "1.0.0"))
        mnests[mid] = {
            "id": mid, "key": mnest_key(src, "1.0.0", dst, "1.0.0"), "src_executor": src, "src_version": "1.0.0",
            "dst_executor": dst, "dst_version": "1.0.0", "weight": rng.random(), "weight_at": T0.isoformat(),
            "uses": rng.randint(1, 50), "ts_first": T0.isoformat(), "ts_last": T0.isoformat(), "decay_lambda": 0.018,
            "tags": rng.sample(TAGS, 2), "state": rng.choice(["active", "active", "active", "decaying", "proto"]),
            "origin": "observed", "desired_signature": None, "archive_proposed": False, "superseded_by": None,
            "superseded_at": None,
        }
    return {"mnests": mnests}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--per-mnest", type=int, default=100)
    parser.add_argument("--topk-mnests", type=int, default=100_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="metnos-bench-mnest-", dir=os.environ.get("BENCH_DIR")))
    try:
        ws = Workspace(root / "data", root / "config")
        log = EventLog(ws, env={"LMDB_SYNC": "no"})
        start = time.perf_counter()
        total = fill(log, args.events, args.per_mnest)
        print(f"wrote {total:,} Mnest events in {time.perf_counter() - start:.1f} s")

        store = ViewStore.open(ws.views_dir, "mnestome")
        view = MaterialisedView(MnestomeFold(), store)
        start = time.perf_counter()
        state = view.catch_up(log)
        fold_view = total / (time.perf_counter() - start)
        assert sum(m["uses"] >= 1 for m in state["mnests"].values()) == len(state["mnests"])

        fold = MnestomeFold()
        mem = fold.initial()
        start = time.perf_counter()
        n = 0
        for nid, e in log.domain_events(1, topics=fold.topics):
            fold.apply(mem, e, nid)
            n += 1
        fold_mem = n / (time.perf_counter() - start)
        assert n == total
        assert orjson.dumps(mem, option=orjson.OPT_SORT_KEYS) == view.state_bytes()

        # A stored event's decoded payload, for a baseline record of the same size.
        sample = orjson.dumps({"timestamp": T0.isoformat(), "uses": 2, "turn_id": "0" * 36, "originator_topic": "domain.mnest:Mnest.MnestReinforced"})
        raw = raw_scan_rate(root, total, sample)
        store.close()
        log.close()

        print(f"{'case':<44} {'ev/s':>11} {'raw LMDB':>11} {'ratio':>7}")
        print(f"{'(a) fold ' + format(total, ',') + ' events into the view':<44} {fold_view:>11,.0f} {raw:>11,.0f} {fold_view / raw:>7.2f}")
        print(f"{'(b) fold in memory (decode + apply)':<44} {fold_mem:>11,.0f} {raw:>11,.0f} {fold_mem / raw:>7.2f}")

        big = synthetic_state(args.topk_mnests)
        for label, kwargs in (("top 20", {}), ("top 20 tag=invoice", {"tag": "invoice"}), ("top 20 state=decaying", {"states": ("decaying",)})):
            runs = []
            for _ in range(5):
                start = time.perf_counter()
                rows = top(big, 20, **kwargs)
                runs.append(time.perf_counter() - start)
            assert len(rows) == 20
            print(f"(c) {label} over {args.topk_mnests:,} mnests: {min(runs) * 1000:.1f} ms (best of 5)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
