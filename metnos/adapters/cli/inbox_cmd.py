"""``metnos inbox``: what waits for you on every way in, answered from the command line.

Approvals, questions and messages given up wait in the running daemon (one
inbox, metnos/services/inbox.py), whichever way in their turn came from: this
command lists and answers them through the daemon's API, as the dashboard
does. The first answer counts; a second is refused, naming where the first
came from. Each answer is recorded as given on ``cli``.

    metnos inbox                      # list (also: metnos inbox list [--json])
    metnos inbox yes ID | no ID       # an approval
    metnos inbox answer ID WORDS...   # a question
    metnos inbox retry ID | dismiss ID  # a message given up

An id prefix as listed (eight characters) is enough.
"""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from domain.errors import MetnosError
from metnos.settings.loader import in_force
from metnos.settings import i18n

# The way in an answer from here is recorded as given on.
VIA = "cli"


class InboxIdUnknown(MetnosError):
    """An id (or prefix) that names no item of the inbox, or more than one."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inbox", help="list and answer what waits for you: approvals, questions, undelivered messages")
    p.add_argument("--http", metavar="HOST:PORT", help="the daemon's address (default: where it serves, else [daemon] http)")
    p.add_argument("--json", action="store_true", help="print the daemon's JSON answer")
    p.set_defaults(run=run_list)
    # The same options after a subcommand (`metnos inbox list --json`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--http", metavar="HOST:PORT", default=argparse.SUPPRESS, help="the daemon's address")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the daemon's JSON answer")
    inner = p.add_subparsers(dest="inbox_command", metavar="SUBCOMMAND")
    listing = inner.add_parser("list", help="list what waits (the default)", parents=[common])
    listing.set_defaults(run=run_list)
    for name, said in (("yes", "approve an approval"), ("no", "deny an approval")):
        one = inner.add_parser(name, help=said, parents=[common])
        one.add_argument("item_id", help="the approval's id (a prefix is enough)")
        one.set_defaults(run=run_answer, answer={"approve": name == "yes"})
    reply = inner.add_parser("answer", help="answer a question with words", parents=[common])
    reply.add_argument("item_id", help="the question's id (a prefix is enough)")
    reply.add_argument("words", nargs="+", help="the answer")
    reply.set_defaults(run=run_answer, answer=None)
    for name, said in (("retry", "send an undelivered message again"), ("dismiss", "let an undelivered message go")):
        one = inner.add_parser(name, help=said, parents=[common])
        one.add_argument("item_id", help="the message's id (a prefix is enough)")
        one.set_defaults(run=run_answer, answer={"action": name})


def _call(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    from metnos.services import daemon_client  # deferred: httpx is not needed by `metnos --help`

    return daemon_client.call(in_force().workspace, method, path, body, http=getattr(args, "http", None))


def _line(item: dict[str, Any]) -> str:
    short = item["id"][:8]
    if item["kind"] == "approval":
        args = orjson.dumps(item["args"], option=orjson.OPT_SORT_KEYS).decode()
        line = i18n.said("inbox.approval", short=short, channel=item["channel"], step=item["step"], executor=item["executor"],
                         args=args[:200], seconds=item["seconds_left"])
        hint = f"metnos inbox yes {short} | metnos inbox no {short}"
    elif item["kind"] == "question":
        line = i18n.said("inbox.question", short=short, channel=item["channel"], question=i18n.said_words(item["question"], i18n.command_language()),
                         seconds=item["seconds_left"])
        hint = f"metnos inbox answer {short} WORDS..."
    else:
        line = i18n.said("inbox.undelivered", short=short, kind=item["message_kind"], channel=item["channel"], address=item["address"],
                         attempts=item["attempts"], cause=item["cause"])
        hint = f"metnos inbox retry {short} | metnos inbox dismiss {short}"
    request = "\n          " + i18n.said("inbox.for", request=item["request"][:120]) if item.get("request") else ""
    text = "\n          " + i18n.said("inbox.text", text=item["text"][:120]) if item["kind"] == "undelivered" else ""
    return f"{line}{request}{text}\n          {hint}"


def run_list(args: argparse.Namespace) -> int:
    items = _call(args, "GET", "/api/inbox")
    if args.json:
        print(orjson.dumps(items).decode())
        return 0
    if not items:
        print(i18n.said("inbox.nothing"))
        return 0
    for item in items:
        print(_line(item))
    return 0


def _resolve(items: list[dict[str, Any]], given: str) -> str:
    found = [i["id"] for i in items if i["id"].startswith(given)]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise InboxIdUnknown(f"{given!r} is the start of {len(found)} items' ids; give more of it (`metnos inbox` lists them)")
    # Not waiting any more: the daemon says whether it was answered, and where.
    return given


def run_answer(args: argparse.Namespace) -> int:
    item_id = _resolve(_call(args, "GET", "/api/inbox"), args.item_id)
    body = dict(args.answer) if args.answer is not None else {"answer": " ".join(args.words)}
    done = _call(args, "POST", f"/api/inbox/{item_id}", {**body, "via": VIA})
    if args.json:
        print(orjson.dumps(done).decode())
        return 0
    if done["kind"] == "approval":
        print(i18n.said("inbox.approved" if done["approved"] else "inbox.denied", id=done["id"][:8], by=done.get("by", VIA)))
    elif done["kind"] == "question":
        print(i18n.said("inbox.answered", id=done["id"][:8], by=done.get("by", VIA)))
    else:
        print(i18n.said("inbox.queued_again" if done["action"] == "retry" else "inbox.dismissed", id=done["id"][:8], by=done["by"]))
    return 0
