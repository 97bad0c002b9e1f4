"""``metnos calendar password SOURCE``: keep a calendar's or address book's password in the vault."""

from __future__ import annotations

import argparse
import getpass
import sys

from metnos.settings import i18n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calendar", help="the calendars and address books of read_events, set_events, read_contacts")
    inner = p.add_subparsers(dest="calendar_command", required=True, metavar="SUBCOMMAND")
    s = inner.add_parser("password", help="store a server source's password in the vault (asked without echo, "
                                          "or one line on standard input)")
    s.add_argument("source", help="NAME of [calendar.sources.NAME] or [contacts.sources.NAME] in config.toml")
    s.set_defaults(run=run_password)


def run_password(args: argparse.Namespace) -> int:
    # Deferred: the vault's crypto is not needed by `metnos --help`.
    from metnos.services.calendar import UnknownDavSource, store_password

    if sys.stdin.isatty():
        password = getpass.getpass(f"password of {args.source} (kept encrypted in the vault): ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    try:
        name = store_password(args.source, password)
    except UnknownDavSource as e:
        print(f"metnos calendar password: {i18n.said_error(str(e))}", file=sys.stderr)
        return 2
    print(f"stored the password of {args.source} in the vault as {name!r}")
    return 0
