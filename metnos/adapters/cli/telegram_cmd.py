"""``metnos telegram pair``: a one-time code that lets in the chat that sends it (docs/channels.md)."""

from __future__ import annotations

import argparse

import orjson

from metnos.services.pairing import DEFAULT_TTL_S

CHANNEL = "telegram"


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 < seconds <= 86400:
        raise argparse.ArgumentTypeError(f"{value} s: a code lives more than 0 s and at most a day (86400 s)")
    return seconds


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("telegram", help="the Telegram channel: pair a chat")
    telegram_sub = p.add_subparsers(dest="telegram_command", required=True, metavar="SUBCOMMAND")
    pair = telegram_sub.add_parser("pair", help="print a one-time code; the chat that sends it to the bot is allowed from then on")
    pair.add_argument("--expires-in", type=_seconds, default=DEFAULT_TTL_S, metavar="SECONDS",
                      help=f"how long the code may be used (default {DEFAULT_TTL_S:.0f} s)")
    pair.add_argument("--json", action="store_true")
    pair.set_defaults(run=run_pair)


def run_pair(args: argparse.Namespace) -> int:
    # Deferred: booting the runtime is not for `metnos --help`.
    from metnos.services import wiring
    from metnos.services.pairing import issue_code

    with wiring.boot(birth=False) as runtime:
        code, expires = issue_code(runtime, channel=CHANNEL, ttl_s=args.expires_in)
    until = expires.isoformat(timespec="seconds")
    if args.json:
        print(orjson.dumps({"code": code, "expires_at": until}).decode())
    else:
        print(code)
        print(f"Send this code to the bot from the chat to allow, before {until} (once; it then expires).")
        print("The chat is added to the allow-list in the log; `metnos daemon` serves it from its next message.")
    return 0
