"""A separate OS process that appends to an LMDB log, for the durability tests.

usage: python -m tests.support.log_writer PATH NAME BATCHES BATCH_SIZE
Prints "ready" once the environment is open, then "batch" before each insert.
"""

from __future__ import annotations

import sys
from pathlib import Path
from uuid import uuid5, NAMESPACE_URL

from eventsourcing.persistence import StoredEvent

from metnos.mechanisms.store import environment as environments
from metnos.mechanisms.store.lmdb import LMDBApplicationRecorder


def main() -> None:
    path, name, batches, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    shared = environments.acquire(Path(path), sync=True)
    recorder = LMDBApplicationRecorder(shared, "shared_events")
    originator = uuid5(NAMESPACE_URL, name)
    print("ready", flush=True)
    version = 0
    for _ in range(batches):
        batch = []
        for _ in range(size):
            version += 1
            batch.append(StoredEvent(originator_id=originator, originator_version=version, topic=f"test:{name}", state=b'{"n":%d}' % version))
        print("batch", flush=True)
        recorder.insert_events(batch)
    print("done", flush=True)
    environments.release(shared)


if __name__ == "__main__":
    main()
