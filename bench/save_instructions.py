"""Instructions a 20-event save costs without fsync, counted by callgrind: deterministic where the clock is not.

    python bench/save_instructions.py PART N

makes 100 of bench/log_throughput.py's 20-event turns and runs PART for the first N of them.
Imports, setup and the turns' making are the same for every N, so the count of N=100 less
the count of N=0, over 100, is what one save (or part of one) costs:

    python3 -m compileall -q metnos domain bench     # or the first run pays for the .pyc
    for n in 0 100; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.$n \\
        "$(python3 -c 'import sys; print(sys.executable)')" bench/save_instructions.py save $n
    done
    # (totals of cg.100 - totals of cg.0) / 100

PART is ``save`` (``EventLog.save`` of a turn), ``encode`` (the mapper's twenty states),
``layout`` (``encode_batch``: the index entries and records), ``write`` (an empty write
transaction of the log's environment), ``raw`` or ``same`` (the two raw LMDB baselines of
bench/log_throughput.py). It runs on trees from before ``FastMapper.stored_rows`` too.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.log_throughput import T0, Raw, RawSameKeys, make_turn  # noqa: E402
from metnos.mechanisms.eventlog import EventLog, _collected  # noqa: E402
from metnos.mechanisms.store.records import encode_batch  # noqa: E402
from metnos.settings.workspace import Workspace  # noqa: E402

TURNS = 100


def main() -> None:
    part, n = sys.argv[1], int(sys.argv[2])
    home = Path(tempfile.mkdtemp(prefix="metnos-save-instructions-"))
    log = EventLog(Workspace(home / "data", home / "config"), env={"LMDB_SYNC": "no"})
    clock = [T0]
    for _ in range(3):  # the caches a log fills on its first saves (topics, classes), filled
        log.save(make_turn(20, clock))
    turns = [make_turn(20, clock) for _ in range(TURNS)]
    mapper = log.mapper
    rows_of = getattr(mapper, "stored_rows", None) or (lambda events: [mapper.to_stored_event(e) for e in events])
    if part == "save":
        for turn in turns[:n]:
            log.save(turn)
    elif part == "encode":
        batches = [_collected([turn])[0] for turn in turns]
        for events in batches[:n]:
            rows_of(events)
    elif part == "layout":
        batches = [rows_of(_collected([turn])[0]) for turn in turns]
        ids = list(range(1, 21))
        for rows in batches[:n]:
            encode_batch(rows, ids)
    elif part == "write":
        for _ in range(n):
            log.recorder.shared.write(lambda txn: None)
    elif part in ("raw", "same"):
        side = (Raw if part == "raw" else RawSameKeys)(home, "count", sync=False)
        side.saves(3, 20)
        side.saves(n, 20)
        side.close()
    else:
        sys.exit(f"unknown part {part!r}")
    log.close()


if __name__ == "__main__":
    main()
