"""Instructions a full scan into domain events costs an event, counted by callgrind: deterministic where the clock is not.

    python bench/scan_instructions.py PART N LOG_DIR

scans the log in LOG_DIR (bench/log_throughput.py's 20-event turns, 20,000 events; made on
the first run when the folder is missing) N times with PART. Imports, opening the log and a
first scan that fills the caches (topics, classes, shapes) are the same for every N, so the
count of N=2 less the count of N=0, over 40,000, is what one scanned event costs:

    python3 -m compileall -q metnos domain bench     # or the first run pays for the .pyc
    python3 bench/scan_instructions.py ours 0 /tmp/scan-log   # makes the log, outside callgrind
    for n in 0 2; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.scan.$n \\
        "$(python3 -c 'import sys; print(sys.executable)')" bench/scan_instructions.py ours $n /tmp/scan-log
    done
    # (totals of cg.scan.2 - totals of cg.scan.0) / 40,000

PART is ``ours`` (``EventLog.domain_events``, every event made), ``raw`` (raw LMDB with one key
an event and ``orjson.loads`` of each value, bench/log_throughput.py's baseline, over a table
of the same count made beside the log) or ``same`` (the log's own records read as raw LMDB
would: the header's lengths, then ``orjson.loads`` of the state).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lmdb  # noqa: E402
import orjson  # noqa: E402

from bench.log_throughput import STEP, T0, make_turn, read_records_as_raw  # noqa: E402
from metnos.mechanisms.eventlog import EventLog  # noqa: E402
from metnos.settings.workspace import Workspace  # noqa: E402

EVENTS = 20_000
PER_TURN = 20


def main() -> None:
    part, n, home = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    fresh = not home.exists()
    log = EventLog(Workspace(home / "data", home / "config"), env={"LMDB_SYNC": "no"})
    env = lmdb.open(str(home / "raw"), map_size=1 << 30, sync=False)
    if fresh:
        clock = [T0]
        for _ in range(EVENTS // PER_TURN):
            log.save(make_turn(PER_TURN, clock))
        value = orjson.dumps({"timestamp": T0.isoformat(), **STEP})
        with env.begin(write=True) as txn:
            for key in range(1, EVENTS + 1):
                txn.put(key.to_bytes(8, "big"), value, append=True)
    def ours() -> int:
        count = 0
        for _ in log.domain_events():
            count += 1
        return count

    def raw() -> int:
        count = 0
        with env.begin() as txn, txn.cursor() as cursor:
            for _, v in cursor:
                orjson.loads(v)
                count += 1
        return count

    def same() -> int:
        return read_records_as_raw(log)

    scan = {"ours": ours, "raw": raw, "same": same}.get(part)
    if scan is None:
        sys.exit(f"unknown part {part!r}")
    assert scan() == EVENTS  # the caches a scan fills on its first pass, filled
    for _ in range(n):
        assert scan() == EVENTS
    env.close()
    log.close()


if __name__ == "__main__":
    main()
