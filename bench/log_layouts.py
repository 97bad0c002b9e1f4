"""How close to raw LMDB a durable 20-event save can come, layout by layout, with the log's encoding added.

    python bench/log_layouts.py [--saves 300] [--rounds 7]

Issue 37 item 7 asks a turn-sized durable save at 0.8 of raw LMDB (bench/log_throughput.py's (b): 20
puts of a ready-made value into one table, one synced commit). This bench asks what any layout reaches:

  raw                 20 ready-made values appended to one table (log_throughput's baseline)
  raw, orjson         the simplest log that could work: each event's dict through orjson.dumps, then appended
  raw, log's records  the same with values the size of the log's records (header, originator, topic, state)
  records, a named table  the same in a named table, as a log beside other tables must keep them (no index at all)
  index in a side file    the records in a named table, one index entry a save in a second LMDB file committed
                      without fsync (an index a log could rebuild from its records after a crash)
  one index a save    the log's records and ONE index entry a save (an aggregate's run of versions), two tables
  the log's layout    the log's records and an index entry an event, two tables (log_throughput's "raw, same")
  ours                the log itself (EventLog.save of a 20-event turn, its encoding in the save)
  ours, a turn's commit   the log as a turn writes it: each event encoded when its step saves it in the
                      turn's unit of work, the commit at the end timed (log_throughput's "a turn, its commit")

and the CPU time of the log's encoding alone (collecting the turn's events, laying out their rows and
records, no write). "best with our encoding" adds that time to the best layout's: what a log of that
layout, writing what ours writes, would reach with this encoding; the figure the target is read against.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import lmdb  # noqa: E402

import orjson  # noqa: E402

from log_throughput import STEP, Ours, OursTurn, Raw, T0, interleaved, make_turn  # noqa: E402
from metnos.mechanisms.clock import new_id  # noqa: E402
from metnos.mechanisms.store.records import encode_batch  # noqa: E402

PER_SAVE = 20


class RawLogRecords(Raw):
    """Raw, with values of the log's records' size."""

    def __init__(self, root: Path, label: str, record: bytes) -> None:
        super().__init__(root, label, True)
        self.value = record


class RawOrjson(Raw):
    """Raw, each event's fields serialised by orjson in the save (the simplest log that could work)."""

    def __init__(self, root: Path, label: str) -> None:
        super().__init__(root, label, True)
        self.fields = {"timestamp": T0, **STEP}

    def saves(self, saves: int, per_save: int) -> float:
        dumps, fields = orjson.dumps, self.fields
        start = time.perf_counter()
        for _ in range(saves):
            with self.env.begin(write=True) as txn:
                for _ in range(per_save):
                    self.key += 1
                    txn.put(self.key.to_bytes(8, "big"), dumps(fields), append=True)
        return time.perf_counter() - start


class NamedRecords(RawLogRecords):
    """The log's records in a named table of their own, nothing else: what a log sharing its file with
    other tables (its meta, its views) writes at the least."""

    def __init__(self, root: Path, label: str, record: bytes) -> None:
        self.env = lmdb.open(str(root / label), map_size=1 << 30, sync=True, metasync=True, max_dbs=4)
        self.records = self.db = self.env.open_db(b"records")
        self.value, self.key = record, 0


class SideIndex(NamedRecords):
    """Records in a named table, synced; one index entry a save in a second file, committed without fsync."""

    def __init__(self, root: Path, label: str, record: bytes) -> None:
        super().__init__(root, label, record)
        self.side = lmdb.open(str(root / (label + "-index")), map_size=1 << 30, sync=False, metasync=False, max_dbs=2)
        self.index = self.side.open_db(b"index")

    def saves(self, saves: int, per_save: int) -> float:
        start = time.perf_counter()
        for _ in range(saves):
            originator = b"\x00\x11u" + new_id().bytes
            first = self.key + 1
            with self.env.begin(write=True) as txn:
                for _ in range(per_save):
                    self.key += 1
                    txn.put(self.key.to_bytes(8, "big"), self.value, append=True, db=self.records)
            with self.side.begin(write=True) as txn:
                txn.put(originator + (per_save + (1 << 63)).to_bytes(8, "big"), first.to_bytes(8, "big") + (1).to_bytes(8, "big"), db=self.index)
        return time.perf_counter() - start

    def close(self) -> None:
        super().close()
        self.side.close()


class TwoTables:
    """The log's records in one table and an index in another: an entry an event, or one a save."""

    def __init__(self, root: Path, label: str, record: bytes, *, entry_per_event: bool) -> None:
        self.env = lmdb.open(str(root / label), map_size=1 << 30, sync=True, metasync=True, max_dbs=4)
        self.index = self.env.open_db(b"index")
        self.records = self.env.open_db(b"records")
        self.value, self.per_event, self.key = record, entry_per_event, 0

    def saves(self, saves: int, per_save: int) -> float:
        start = time.perf_counter()
        for _ in range(saves):
            originator = b"\x00\x11u" + new_id().bytes
            with self.env.begin(write=True) as txn:
                first = self.key + 1
                for version in range(1, per_save + 1):
                    self.key += 1
                    key = self.key.to_bytes(8, "big")
                    if self.per_event:
                        txn.put(originator + (version + (1 << 63)).to_bytes(8, "big"), key, db=self.index)
                    txn.put(key, self.value, append=True, db=self.records)
                if not self.per_event:
                    # The run's last version as the key (a seek finds the run holding a version), its first id and version as the value.
                    txn.put(originator + (per_save + (1 << 63)).to_bytes(8, "big"), first.to_bytes(8, "big") + (1).to_bytes(8, "big"), db=self.index)
        return time.perf_counter() - start

    def close(self) -> None:
        self.env.close()


def log_record(ours: Ours) -> bytes:
    """One of the records the log writes for a step of the bench's turn."""
    turn = make_turn(2, [T0])
    rows = ours.log.mapper.stored_rows(turn.collect_events())
    _, records = encode_batch(rows, [1, 2])
    return records[1][1]


def encoding_seconds(ours: Ours, saves: int) -> float:
    """CPU seconds of the log's encoding of ``saves`` turns: their events collected, rows and records laid out."""
    turns = [make_turn(PER_SAVE, ours.clock) for _ in range(saves)]
    stored_rows = ours.log.mapper.stored_rows
    ids = list(range(1, PER_SAVE + 1))
    start = time.process_time()
    for turn in turns:
        encode_batch(stored_rows(turn.collect_events()), ids)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--saves", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="metnos-layouts-", dir=os.environ.get("BENCH_DIR")))
    each = max(1, args.saves // args.rounds)
    try:
        ours = Ours(root, "layouts", True)
        record = log_record(ours)
        sides: dict[str, Any] = {
            "raw": Raw(root, "layouts", True),
            "raw, orjson": RawOrjson(root, "orjson"),
            "raw, log's records": RawLogRecords(root, "records", record),
            "records, a named table": NamedRecords(root, "named", record),
            "index in a side file": SideIndex(root, "side", record),
            "one index a save": TwoTables(root, "per-save", record, entry_per_event=False),
            "the log's layout": TwoTables(root, "per-event", record, entry_per_event=True),
            "ours": ours,
            "ours, a turn's commit": OursTurn(root, "layouts", True),
        }
        encoding: list[float] = []

        def encode(_round: int) -> float:
            encoding.append(encoding_seconds(ours, each))
            return encoding[-1]

        try:
            times = interleaved({**{name: (lambda _r, s=side: s.saves(each, PER_SAVE)) for name, side in sides.items()}, "encoding": encode}, args.rounds)
        finally:
            for side in sides.values():
                side.close()
        events = each * PER_SAVE
        seconds = {name: statistics.median(times[name]) for name in sides}
        raw = seconds["raw"]
        print(f"durable saves of {PER_SAVE} events, {each} a round, median of {args.rounds} interleaved rounds; "
              f"the log's record is {len(record)} bytes, the raw value {len(sides['raw'].value)}")
        print(f"{'side':<34} {'events/s':>10} {'of raw':>7}")
        for name in sides:
            print(f"{name:<34} {events / seconds[name]:>10,.0f} {raw / seconds[name]:>7.2f}")
        encode_s = statistics.median(encoding)
        print(f"{'our encoding alone (CPU)':<34} {events / encode_s:>10,.0f} {'':>7}   {encode_s / each * 1e6:,.0f} us a save")
        best = min(seconds["one index a save"], seconds["the log's layout"])
        print(f"{'best layout with our encoding':<34} {events / (best + encode_s):>10,.0f} {raw / (best + encode_s):>7.2f}")
        print("target (issue 37 item 7): ours at 0.8 of raw")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
