"""A rebuild worker: fold some projections from a workspace's log, in a process of its own.

    python -m replay.rebuild_worker DATA_DIR CONFIG_DIR HEAD PROJECTION...

Started by :func:`replay.rebuild.rebuild` on big logs. The views were reset
by the parent; the worker folds the whole log into them, writing its position
(a notification id) on a line of stdout as it goes. A failure is a non-zero
exit with the reason on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from metnos.mechanisms.eventlog import EventLog
from metnos.settings.workspace import Workspace
from projections.views import open_stores, open_views
from replay.rebuild import fold_from_log


def main(argv: list[str]) -> int:
    data_dir, config_dir, head, *names = argv
    workspace = Workspace(data_dir=Path(data_dir), config_dir=Path(config_dir))
    log = EventLog(workspace)
    stores = open_stores(workspace, tuple(names))
    try:
        fold_from_log(log, open_views(workspace, stores), int(head), progress=_report)
    finally:
        for store in stores.values():
            store.close()
        log.close()
    return 0


def _report(_label: str, position: int, _head: int) -> None:
    sys.stdout.write(f"{position}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
