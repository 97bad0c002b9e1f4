"""``metnos sandbox status``: which layers of the fence are active here."""

from __future__ import annotations

import argparse
from dataclasses import asdict

import orjson


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sandbox", help="the executor sandbox")
    inner = p.add_subparsers(dest="sandbox_command", required=True, metavar="SUBCOMMAND")
    s = inner.add_parser("status", help="print which sandbox layers are active")
    s.add_argument("--json", action="store_true")
    s.set_defaults(run=run_status, reports_the_sandbox=True)


def run_status(args: argparse.Namespace) -> int:
    # Deferred: probing the sandbox loads its layers, which `metnos --help` does not need.
    from metnos.services.sandbox import format_status, status

    st = status()
    if args.json:
        print(orjson.dumps(asdict(st), default=str).decode())
    else:
        print(format_status(st))
    # A script can tell from the exit code alone that nothing would run.
    return 1 if st.mode == "unavailable" else 0
