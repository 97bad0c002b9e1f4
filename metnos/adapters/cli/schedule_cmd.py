"""``metnos schedule add|list|show|pause|resume|cancel|history|run-now``."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from domain.schedule import CHANNELS, ON_FAILURE
from domain.errors import MetnosError
from metnos.settings.loader import in_force


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schedule", help="requests with a schedule: add, list, pause, cancel, history")
    inner = p.add_subparsers(dest="schedule_command", required=True, metavar="SUBCOMMAND")

    add = inner.add_parser("add", help="schedule an executor (or a chain) on a cron cadence; prints {schedule_id, next_fire}")
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--executor", help="the executor to run at each firing")
    what.add_argument("--chain", help='a JSON list of steps: [{"executor": ..., "args": {...}}, ...]')
    add.add_argument("--args", default="{}", help="the arguments as a JSON object")
    add.add_argument("--cron", required=True, help="five-field cron, e.g. '*/5 * * * *'")
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


def _boot():  # noqa: ANN202
    from metnos.runtime.booted import Runtime
    from metnos.runtime.scheduler.clock import clock_from_env

    return Runtime.boot(in_force().workspace, birth=False, clock=clock_from_env())


def _json_arg(text: str, what: str, kind: type) -> Any:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise MetnosError(f"{what} is not valid JSON: {e}") from None
    if not isinstance(value, kind):
        raise MetnosError(f"{what} must be a JSON {'object' if kind is dict else 'list'}")
    return value


def run_add(args: argparse.Namespace) -> int:
    from metnos.runtime.scheduler.service import DEFAULT_GRACE_S, ScheduleService

    call_args = _json_arg(args.args, "--args", dict)
    target = {"kind": "executor", "name": args.executor} if args.executor else {"kind": "chain", "steps": _json_arg(args.chain, "--chain", list)}
    with _boot() as rt:
        out = ScheduleService(rt).create(
            target=target, args=call_args, cron=args.cron, timezone=args.timezone, count=args.count, expiry=args.expiry,
            on_failure=args.on_failure, max_consecutive_failures=args.max_failures or None, channel=args.channel,
            grace_s=DEFAULT_GRACE_S if args.grace is None else args.grace, label=args.label, paused=args.paused,
            # The user typed the command: that is the approval a schedule
            # with side effects needs, recorded as such.
            approved_by="user:cli",
        )
    print(orjson.dumps(out).decode())
    return 0


def _target(s: dict[str, Any]) -> str:
    t = s["target"]
    return t.get("name") or (f"builtin:{t['key']}" if t.get("key") else " -> ".join(x["executor"] for x in t.get("steps", [])))


def run_list(args: argparse.Namespace) -> int:
    from metnos.runtime.scheduler.service import ScheduleService

    with _boot() as rt:
        rows = ScheduleService(rt).list(status=args.status)
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    print(f"{'SCHEDULE':<36}  {'STATUS':<9} {'CRON':<14} {'NEXT FIRE (UTC)':<19} {'FIRED':>7}  TARGET / LABEL")
    for s in rows:
        fired = f"{s['fired']}/{s['count']}" if s["count"] else str(s["fired"])
        nxt = (s["next_fire"] or "-")[:19]
        print(f"{s['id']:<36}  {s['status']:<9} {s['cron']:<14} {nxt:<19} {fired:>7}  {_target(s)}{'  (' + s['label'] + ')' if s['label'] else ''}")
    return 0


def run_one(args: argparse.Namespace) -> int:
    from metnos.runtime.scheduler.service import ScheduleService

    with _boot() as rt:
        service = ScheduleService(rt)
        action = args.action
        if action == "history":
            out = service.history(args.schedule_id)
        elif action == "run-now":
            out = service.run_now(args.schedule_id)
        else:
            out = getattr(service, action)(args.schedule_id)
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
    elif kind in ("ScheduleCancelled", "ScheduleCompleted"):
        text = e["reason"]
    else:
        text = orjson.dumps({k: v for k, v in e.items() if k not in ("type", "at", "position")}, default=str).decode()[:120]
    return f"{e['position']:>4}  {at}  {kind:<18} {text}"
