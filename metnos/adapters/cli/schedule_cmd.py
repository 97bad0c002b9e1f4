"""``metnos schedule add|modify|list|show|pause|resume|cancel|history|run-now``.

A cadence is a cron or words ("every morning at 8", "ogni martedì alle 9");
words are read into a cron at creation and shown back with the next three
firings, and nothing is created until the user confirms (or gave --yes).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from domain.schedule import CHANNELS, ON_FAILURE
from domain.errors import MetnosError
from metnos.settings import i18n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schedule", help="requests with a schedule: add, list, pause, cancel, history")
    inner = p.add_subparsers(dest="schedule_command", required=True, metavar="SUBCOMMAND")

    add = inner.add_parser("add", help="schedule an executor (or a chain) on a cadence in words or cron; prints {schedule_id, next_fire}")
    add.add_argument("when", nargs="?", help='the cadence in words, e.g. "every morning at 8", "tomorrow at 9", "ogni lunedì alle 9"')
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--executor", help="the executor to run at each firing")
    what.add_argument("--chain", help='a JSON list of steps: [{"executor": ..., "args": {...}}, ...]')
    add.add_argument("--args", default="{}", help="the arguments as a JSON object")
    add.add_argument("--cron", help="five-field cron, e.g. '*/5 * * * *' (instead of words)")
    add.add_argument("--yes", action="store_true", help="confirm a cadence given in words without being asked")
    add.add_argument("--timezone", default="UTC", help="IANA zone the cron times are in (default UTC)")
    add.add_argument("--count", type=int, help="number of firings (1 = once; default: no limit)")
    add.add_argument("--expiry", help="ISO timestamp after which no slot fires")
    add.add_argument("--on-failure", default="notify", choices=ON_FAILURE)
    add.add_argument("--max-failures", type=int, default=3, help="cancel after this many failed firings in a row (0 = never)")
    add.add_argument("--channel", default="outbox", choices=CHANNELS, help="where each result goes")
    add.add_argument("--grace", type=int, default=None, help="seconds within which a missed slot is still fired (default 900)")
    add.add_argument("--label", default="")
    add.add_argument("--paused", action="store_true", help="create it paused")
    add.set_defaults(run=run_add)

    mod = inner.add_parser("modify", help="change a schedule's cadence, target or arguments (recorded as an event)")
    mod.add_argument("schedule_id", help="the id, or a unique prefix of it")
    mod.add_argument("when", nargs="?", help="the new cadence in words")
    mod.add_argument("--cron", help="the new cadence as a five-field cron")
    target = mod.add_mutually_exclusive_group()
    target.add_argument("--executor", help="the new executor to run")
    target.add_argument("--chain", help="the new chain, a JSON list of steps")
    mod.add_argument("--args", help="the new arguments as a JSON object")
    mod.add_argument("--timezone", help="the new IANA zone")
    mod.add_argument("--count", type=int, help="the new number of firings")
    mod.add_argument("--channel", choices=CHANNELS)
    mod.add_argument("--label")
    mod.add_argument("--yes", action="store_true", help="confirm a cadence given in words without being asked")
    mod.set_defaults(run=run_modify)

    ls = inner.add_parser("list", help="the schedules and their next firing")
    ls.add_argument("--status", choices=("active", "paused", "completed", "cancelled"))
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)

    for name, helptext in (("show", "one schedule's state"), ("pause", "stop firing until resumed"),
                           ("resume", "fire again from now on (slots missed while paused are not owed)"),
                           ("cancel", "close a schedule for good"),
                           ("history", "a schedule's whole history from its events"),
                           ("run-now", "fire once now, outside the cadence (not counted)")):
        cmd = inner.add_parser(name, help=helptext)
        cmd.add_argument("schedule_id", help="the id, or a unique prefix of it")
        cmd.add_argument("--json", action="store_true")
        cmd.set_defaults(run=run_one, action=name)


def _schedules():  # noqa: ANN202
    # Deferred: the scheduler's service boots the runtime, which `metnos --help` does not need.
    from metnos.services import schedules

    return schedules


def _json_arg(text: str, what: str, kind: type) -> Any:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise MetnosError(f"{what} is not valid JSON: {e}") from None
    if not isinstance(value, kind):
        raise MetnosError(f"{what} must be a JSON {'object' if kind is dict else 'list'}")
    return value


def _cadence(args: argparse.Namespace, timezone: str) -> tuple[str | None, int | None]:
    """The cron given, or the words read into one (and its count: 1 for a
    one-shot), shown back with the next firings and confirmed."""
    reading = _confirmed_reading(args, timezone)
    if reading is None:
        return args.cron, None
    return reading["cron"], reading["count"]


def _confirmed_reading(args: argparse.Namespace, timezone: str) -> dict[str, Any] | None:
    """The cadence given in words (or as a cron in their place), read as add and modify read it,
    shown back with the next firings and confirmed; None when none was given in words."""
    if args.when and args.cron:
        raise MetnosError("give the cadence once: in words or as --cron, not both")
    if not args.when:
        return None
    reading = _schedules().read_when(args.when, timezone)
    if reading["words"] is None:
        return reading
    times = "\n".join(f"  {t[:16].replace('T', ' ')} UTC" for t in reading["next_fires"])
    once = i18n.said("cli.schedule_once") if reading["count"] == 1 else ""
    print(i18n.said("cli.schedule_read_as", when=args.when, cron=reading["cron"], timezone=reading["timezone"], once=once, times=times),
          file=sys.stderr)
    if not args.yes:
        if not sys.stdin.isatty():
            raise MetnosError(i18n.said("cli.schedule_confirm_needed"))
        if input(i18n.said("cli.schedule_confirm")).strip().lower() not in ("y", "yes", "s", "si", "sì"):
            raise MetnosError(i18n.said("cli.not_confirmed"))
    return reading


def run_add(args: argparse.Namespace) -> int:
    call_args = _json_arg(args.args, "--args", dict)
    target = {"kind": "executor", "name": args.executor} if args.executor else {"kind": "chain", "steps": _json_arg(args.chain, "--chain", list)}
    cron, count = _cadence(args, args.timezone)
    if cron is None:
        raise MetnosError('give the cadence: in words ("every morning at 8") or as --cron')
    out = _schedules().add(
        target=target, args=call_args, cron=cron, timezone=args.timezone, count=count if args.count is None else args.count, expiry=args.expiry,
        on_failure=args.on_failure, max_consecutive_failures=args.max_failures or None, channel=args.channel,
        grace_s=_schedules().DEFAULT_GRACE_S if args.grace is None else args.grace, label=args.label, paused=args.paused,
        # The user typed the command: that is the approval a schedule
        # with side effects needs, recorded as such.
        approved_by="user:cli",
    )
    print(orjson.dumps(out).decode())
    return 0


def run_modify(args: argparse.Namespace) -> int:
    changes: dict[str, Any] = {}
    timezone = args.timezone or _schedules().act("show", args.schedule_id)["timezone"]
    # Words are read once, here, and what the user confirmed is what is recorded (the model, when it
    # read them, is not asked again).
    reading = _confirmed_reading(args, timezone)
    when = args.when if args.when else None
    if args.cron is not None and when is None:
        changes["cron"] = args.cron
    if args.executor:
        changes["target"] = {"kind": "executor", "name": args.executor}
    elif args.chain:
        changes["target"] = {"kind": "chain", "steps": _json_arg(args.chain, "--chain", list)}
    if args.args is not None:
        changes["args"] = _json_arg(args.args, "--args", dict)
    for key in ("timezone", "count", "channel", "label"):
        if getattr(args, key) is not None:
            changes[key] = getattr(args, key)
    if not changes and when is None:
        raise MetnosError("nothing to change: give a cadence, --executor/--chain, --args, --timezone, --count, --channel or --label")
    # The user typed the command: that is the approval new arguments or a new target need.
    out = _schedules().modify(args.schedule_id, changes, approved_by="user:cli", when=when, reading=reading)
    print(orjson.dumps(out, default=str).decode())
    return 0


def _target(s: dict[str, Any]) -> str:
    t = s["target"]
    return t.get("name") or (f"builtin:{t['key']}" if t.get("key") else " -> ".join(x["executor"] for x in t.get("steps", [])))


def run_list(args: argparse.Namespace) -> int:
    rows = _schedules().listed(args.status)
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    print(i18n.said("list.schedules"))
    for s in rows:
        fired = f"{s['fired']}/{s['count']}" if s["count"] else str(s["fired"])
        nxt = (s["next_fire"] or "-")[:19]
        print(f"{s['id']:<36}  {s['status']:<9} {s['cron']:<14} {nxt:<19} {fired:>7}  {_target(s)}{'  (' + s['label'] + ')' if s['label'] else ''}")
    return 0


def run_one(args: argparse.Namespace) -> int:
    action = args.action
    out = _schedules().act(action, args.schedule_id)
    if args.json or action == "run-now":
        print(orjson.dumps(out, default=str).decode())
        return 0 if action != "run-now" or out["ok"] else 1
    if action == "history":
        print(f"schedule {out['schedule_id']}")
        for e in out["events"]:
            print(_history_line(e))
        return 0
    for key in ("id", "label", "status", "closed_reason", "cron", "timezone", "next_fire", "channel", "on_failure",
                "max_consecutive_failures", "count", "expiry", "fired", "ok", "failed", "consecutive_failures", "manual_runs"):
        print(f"{key:<25} {out.get(key)}")
    print(f"{'target':<25} {_target(out)} {orjson.dumps(out['args']).decode()}")
    if out.get("last"):
        last = out["last"]
        print(f"{'last firing':<25} {last['slot'][:19]} {'ok' if last['ok'] else last['kind']} (attempt {last['attempt']}, {last['action']})")
    return 0


def _history_line(e: dict[str, Any]) -> str:
    kind, at = e["type"], e["at"][:19]
    if kind == "ScheduleCreated":
        text = f"created: {_target(e)} cron {e['cron']!r} {e['timezone']}, channel {e['channel']}, count {e['count']}, on_failure {e['on_failure']}"
    elif kind == "FiringStarted":
        text = f"slot {e['slot'][:19]} attempt {e['attempt']}{' (recovery)' if e['recovery'] else ''}{' (run-now)' if e['manual'] else ''}"
    elif kind == "FiringFinished":
        outcome = "ok" if e["ok"] else f"{e['kind']}: {(e.get('error') or {}).get('message', '')}"
        text = f"slot {e['slot'][:19]} attempt {e['attempt']} -> {outcome} [{e['action']}{', final' if e['final'] else ''}]"
    elif kind == "FiringSkipped":
        text = f"passed over {e['missed']} slot(s) {e['first'][:19]} .. {e['last'][:19]}: {e['reason']}"
    elif kind == "ScheduleModified":
        text = "changed: " + ", ".join(f"{k} {orjson.dumps(v).decode() if not isinstance(v, str) else repr(v)}" for k, v in e["changes"].items())
    elif kind in ("ScheduleCancelled", "ScheduleCompleted"):
        text = e["reason"]
    else:
        text = orjson.dumps({k: v for k, v in e.items() if k not in ("type", "at", "position")}, default=str).decode()[:120]
    return f"{e['position']:>4}  {at}  {kind:<18} {text}"
