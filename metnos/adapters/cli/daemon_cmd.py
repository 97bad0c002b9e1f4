"""``metnos daemon``: the one long-running process (docs/daemon.md).

It boots the runtime once and writes the log for every way in
(metnos.services.daemon): the scheduler loop, the warm embedded model, the
HTTP API and dashboard (127.0.0.1:8737 by default, ``--http HOST:PORT``), and
the channels of metnos.services.extensions. Each tick prints one JSON line
with what it did. ``--once`` runs one tick and exits, with no HTTP server
unless ``--http`` is given.

``metnos daemon token`` prints the bearer token the HTTP API wants.
"""

from __future__ import annotations

import argparse
import sys

import orjson

from metnos.services.token import load_or_create_token
from metnos.settings.http_address import DEFAULT_HTTP
from metnos.settings.loader import in_force


def run_token(args: argparse.Namespace) -> int:
    print(load_or_create_token(in_force().workspace))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("daemon", help="the long-running process: scheduler, warm model, HTTP API and dashboard")
    inner = p.add_subparsers(dest="daemon_command", metavar="SUBCOMMAND")
    token = inner.add_parser("token", help="print the bearer token of the daemon's HTTP API (made on first use, mode 0600)")
    token.set_defaults(run=run_token)
    p.add_argument("--http", metavar="HOST:PORT", help=f"serve the HTTP API and the dashboard here (default [daemon] http of config.toml, else {DEFAULT_HTTP})")
    p.add_argument("--tick", type=float, default=60.0, help="seconds between ticks (default 60)")
    p.add_argument("--once", action="store_true", help="run one tick and exit")
    p.add_argument("--skip-birth", action="store_true", help="skip the executors' birth tests at start (signatures are still checked)")
    p.add_argument("--no-model", action="store_true", help="do not start or keep warm the embedded model's shared server")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Deferred: the daemon loads the runtime, the scheduler and the HTTP server, which `metnos --help` does not need.
    from metnos.services import daemon

    options = daemon.DaemonOptions(http=args.http, tick_s=args.tick, once=args.once, skip_birth=args.skip_birth, no_model=args.no_model)
    return daemon.run(options, emit=_emit, warn=_warn)


def _warn(line: str) -> None:
    print(f"metnos: {line}", file=sys.stderr)


def _emit(record: dict) -> None:
    sys.stdout.write(orjson.dumps(record, default=str).decode() + "\n")
    sys.stdout.flush()
