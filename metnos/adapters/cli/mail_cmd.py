"""``metnos mail password ACCOUNT``: keep a mail account's password in the vault."""

from __future__ import annotations

import argparse
import getpass
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mail", help="the mail accounts of read_messages and send_messages")
    inner = p.add_subparsers(dest="mail_command", required=True, metavar="SUBCOMMAND")
    s = inner.add_parser("password", help="store an account's password in the vault (asked without echo, "
                                          "or one line on standard input)")
    s.add_argument("account", help="NAME of [mail.accounts.NAME] in config.toml")
    s.set_defaults(run=run_password)


def run_password(args: argparse.Namespace) -> int:
    # Deferred: the vault loads pynacl, which `metnos --help` does not need.
    from metnos.services.mail import store_password

    if sys.stdin.isatty():
        password = getpass.getpass(f"password of mail account {args.account} (kept encrypted in the vault): ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    name = store_password(args.account, password)
    print(f"stored the password of {args.account} in the vault as {name!r}")
    return 0
