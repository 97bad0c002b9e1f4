"""``metnos plans list|show|approve|forget``: the plans Metnos runs again without the model (docs/cascade.md)."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

import orjson

from metnos.settings.loader import in_force


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plans", help="approved plans: requests answered again without the model")
    inner = p.add_subparsers(dest="plans_command", required=True, metavar="SUBCOMMAND")
    ls = inner.add_parser("list", help="approved plans (L0) and learnt templates (L1)")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)
    show = inner.add_parser("show", help="one plan: its request, steps and answer template")
    show.add_argument("ref", help="plan id or source turn id (a prefix is enough)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=run_show)
    approve = inner.add_parser("approve", help="approve a good turn's plan: the same request then runs it with no model call")
    approve.add_argument("turn", help="turn id (a prefix is enough)")
    approve.add_argument("--json", action="store_true")
    approve.set_defaults(run=run_approve)
    forget = inner.add_parser("forget", help="stop using a plan")
    forget.add_argument("ref", help="plan id or source turn id (a prefix is enough)")
    forget.add_argument("--json", action="store_true")
    forget.set_defaults(run=run_forget)


def _book():  # noqa: ANN202
    from metnos.runtime.cascade.book import PlanBook
    from metnos.runtime.booted import Runtime

    runtime = Runtime.boot(in_force().workspace, birth=False)
    return runtime, PlanBook(runtime)


def _by() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _print_entry(entry: dict[str, Any]) -> None:
    print(f"plan {entry['id'][:8]}  {entry['state']}{'  STALE: ' + entry['stale'] if entry['stale'] else ''}")
    print(f"  request:  {entry['text']}")
    print(f"  from:     turn {entry['turn_id'][:8]}, approved {entry['approved'][:19]} by {entry['by']}")
    print(f"  used:     {entry['uses']} times, last {entry['last_used'][:19]}")
    if entry.get("anti_skill_until"):
        print(f"  anti-skill until {entry['anti_skill_until'][:19]}: it failed")
    for i, step in enumerate(entry["plan"]["steps"], start=1):
        print(f"  step {i}: {step['executor']}@{step['version']} {orjson.dumps(step['args']).decode()[:200]}")
    answer = "".join(s["text"] if "text" in s else "{{step" + ".".join(map(str, s["ref"])) + "}}" for s in entry["plan"]["answer"])
    print(f"  answer:   {answer[:400]}")
    if entry.get("fixed_numbers"):
        print(f"  note:     the answer repeats {', '.join(entry['fixed_numbers'][:5])} as written, whatever the steps give next time")
    if entry.get("quotes_nothing"):
        print("  note:     the answer quotes nothing the steps returned: it reads the same whatever they give next time")


def run_list(args: argparse.Namespace) -> int:
    runtime, book = _book()
    with runtime:
        rows, templates = book.list(), book.templates()
    if args.json:
        print(orjson.dumps({"plans": rows, "templates": templates}).decode())
        return 0
    if not rows and not templates:
        print("no plans yet: after a good answer, `metnos plans approve TURN` keeps its plan")
        return 0
    for e in rows:
        mark = f"stale: {e['stale']}" if e["stale"] and e["state"] == "approved" else e["state"]
        print(f"{e['id'][:8]}  {mark:<12}  uses {e['uses']:>4}  {' > '.join(s['executor'] for s in e['plan']['steps']) or '(no step)'}  «{e['text'][:60]}»")
    for t in templates:
        print(f"{t['id'][:8]}  template      walks {t['walks']:>3} ({t['distinct_values']} values) won {t['wins']} lost {t['losses']}  "
              f"{' > '.join(t['executors'])}  «{t['intent'][:60]}»")
        if t.get("contradicted"):
            print(f"          contradicted, being dropped: {t['contradicted']}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    runtime, book = _book()
    with runtime:
        entry = book.show(args.ref)
    if args.json:
        print(orjson.dumps(entry).decode())
    else:
        _print_entry(entry)
    return 0


def run_approve(args: argparse.Namespace) -> int:
    runtime, book = _book()
    with runtime:
        entry = book.approve(args.turn, by=_by())
    if args.json:
        print(orjson.dumps(entry).decode())
    else:
        _print_entry(entry)
    return 0


def run_forget(args: argparse.Namespace) -> int:
    runtime, book = _book()
    with runtime:
        entry = book.forget(args.ref, by=_by())
    if args.json:
        print(orjson.dumps(entry).decode())
    else:
        print(f"plan {entry['id'][:8]} forgotten: «{entry['text'][:60]}» goes to the model again")
    return 0
