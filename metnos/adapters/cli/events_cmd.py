"""``metnos events``: the log, for people (columns) and machines (--json)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

import orjson

from domain.errors import MetnosError
from metnos.mechanisms.eventlog import EventLog
from metnos.settings.loader import in_force


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("events", help="list the events in the log")
    p.add_argument("--aggregate", help="only events of this aggregate id (a prefix is enough)")
    p.add_argument("--topic", help="only events whose topic contains this text (e.g. TurnStarted)")
    p.add_argument("--since", type=_when, help="only events at or after this ISO time")
    p.add_argument("--until", type=_when, help="only events before this ISO time")
    p.add_argument("--from-id", type=int, default=1, help="start at this notification id")
    p.add_argument("--limit", type=int, default=0, help="at most this many events (0: all)")
    p.add_argument("--json", action="store_true", help="one JSON object a line")
    p.set_defaults(run=run)


def _when(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        msg = f"not an ISO time: {text!r} (e.g. 2026-11-22 or 2026-11-22T08:00:00+00:00)"
        raise argparse.ArgumentTypeError(msg) from None
    if value.tzinfo is None:
        from datetime import timezone

        value = value.replace(tzinfo=timezone.utc)
    return value


def iter_events(log: EventLog, args: argparse.Namespace):  # noqa: ANN201
    shown = 0
    for n in log.notifications(start=args.from_id):
        if args.aggregate and not str(n.originator_id).startswith(args.aggregate):
            continue
        if args.topic and args.topic not in n.topic:
            continue
        try:
            event = log.mapper.to_domain_event(n)
        except Exception as e:  # noqa: BLE001 - a bad record is reported, not fatal to the listing
            msg = f"event {n.id} ({n.topic}) cannot be decoded: {e}"
            raise MetnosError(msg) from None
        state = {k: v for k, v in vars(event).items() if k not in ("originator_id", "originator_version", "timestamp", "originator_topic")}
        ts = getattr(event, "timestamp", None)
        if args.since and (ts is None or ts < args.since):
            continue
        if args.until and (ts is None or ts >= args.until):
            continue
        yield n, ts, state
        shown += 1
        if args.limit and shown >= args.limit:
            return


def run(args: argparse.Namespace) -> int:
    log = EventLog(in_force().workspace)
    out = sys.stdout
    try:
        if not args.json:
            out.write(f"{'ID':>6}  {'TIME (UTC)':<23}  {'AGGREGATE':<13}  {'VER':>4}  EVENT\n")
        for n, ts, state in iter_events(log, args):
            if args.json:
                row = {
                    "id": n.id,
                    "aggregate_id": str(n.originator_id),
                    "aggregate_version": n.originator_version,
                    "topic": n.topic,
                    "timestamp": ts.isoformat() if ts else None,
                    "state": state,
                }
                out.write(orjson.dumps(row, default=str).decode() + "\n")
            else:
                when = ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:23] if ts else "-"
                kind = n.topic.rsplit(":", 1)[-1]
                out.write(f"{n.id:>6}  {when:<23}  {str(n.originator_id)[:13]:<13}  {n.originator_version:>4}  {kind}  {_brief(state)}\n")
    finally:
        log.close()
    return 0


def _brief(state: dict) -> str:
    text = orjson.dumps(state, default=str).decode()
    return text if len(text) <= 100 else text[:97] + "..."
