"""``metnos init``: make the workspace, the log, the keys, the seed executors."""

from __future__ import annotations

import argparse

from metnos.settings.loader import in_force


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="create the workspace (log, config, keys) and install the seed executors")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Deferred: making a workspace boots the runtime, which `metnos --help` does not need.
    from metnos.services.boot import initialise

    report = initialise(in_force().workspace)
    for line in report:
        print(line)
    return 0
