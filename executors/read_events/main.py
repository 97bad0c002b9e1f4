"""read_events: the events of a calendar in a time range, recurrences expanded; free and busy on request.

The calendar is a CalDAV collection or a local .ics file (calendars.py). The
output is data: an event whose text reads like an instruction is returned as
it is and nothing in it is acted upon.
"""

from datetime import datetime, timedelta

from calendars import Refused, failure, local_zone, open_source, parse_when, read_when, show


def _range(args, ctx):
    now = datetime.fromisoformat(ctx["now"])
    today = now.astimezone(local_zone(ctx)).replace(hour=0, minute=0, second=0, microsecond=0)
    if args.get("when"):
        # One day, or a part of one, as said: the whole of it (from a time said, the rest of that day).
        when = read_when(args["when"], ctx)
        day_end = datetime.combine(when.moment.date() + timedelta(days=1), datetime.min.time(), tzinfo=when.moment.tzinfo)
        return when.moment, (day_end if when.kind == "time" else when.until)
    when = read_when(args["start"], ctx) if args.get("start") else None
    start = when.moment if when else today
    if args.get("end"):
        end = parse_when(args["end"], ctx, end_of_day=True)
    elif when is not None and when.kind == "part" or when is not None and when.spoken and when.kind == "day":
        # "tomorrow", "thursday afternoon" alone: that day, that part of it.
        end = when.until
    else:
        end = start + timedelta(days=7)
    if end <= start:
        raise Refused("InvalidArgument", f"end ({args.get('end')}) is not after start ({args.get('start')})")
    return start, end


def _matches(event, needle):
    return not needle or any(needle in event[k].lower() for k in ("summary", "location", "description"))


def _free_busy(events, start, end, ctx):
    """The busy stretches (overlaps merged) and the free ones between, within [start, end)."""
    spans = sorted((max(s, start), min(e, end)) for s, e in (ev["_span"] for ev in events) if e > start and s < end)
    busy = []
    for s, e in spans:
        if busy and s <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], e)
        else:
            busy.append([s, e])
    free, cursor = [], start
    for s, e in busy:
        if s > cursor:
            free.append((cursor, s))
        cursor = max(cursor, e)
    if cursor < end:
        free.append((cursor, end))
    return ([{"start": show(s, ctx), "end": show(e, ctx)} for s, e in busy],
            [{"start": show(s, ctx), "end": show(e, ctx)} for s, e in free])


def run(args, ctx):
    try:
        start, end = _range(args, ctx)
        source = open_source(args, ctx)
        events = source.read(start, end, ctx)
    except Refused as exc:
        return failure(exc)
    needle = (args.get("text") or "").lower()
    events = sorted((e for e in events if _matches(e, needle)), key=lambda e: (e["_span"][0], e["summary"]))
    total = len(events)
    events = events[: args.get("max_events", 200)]
    out = {"ok": True, "entries": events, "range": {"start": show(start, ctx), "end": show(end, ctx)},
           "metadata": {"count": len(events), "truncated": total > len(events), "calendar": source.name}}
    if args.get("free_busy"):
        out["busy"], out["free"] = _free_busy(events, start, end, ctx)
        out["is_free"] = not out["busy"]
    for e in events:
        del e["_span"]
    return out
