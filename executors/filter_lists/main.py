"""filter_lists: two lists in, one out, by set operation or by time overlap."""

import json
from datetime import datetime, timezone

_KEYS = ("path", "id", "name")
_TIME_PAIRS = (("start", "end"), ("start_time", "end_time"), ("starts_at", "ends_at"), ("begin", "end"),
               ("dtstart", "dtend"), ("from", "to"), ("start_date", "end_date"))


def _key_field(a, b, wanted):
    if wanted:
        return wanted
    both = a + b
    for k in _KEYS:
        if both and all(k in e for e in both):
            return k
    return None


def _keyer(field):
    if field is None:
        return lambda e: json.dumps(e, sort_keys=True, default=str)
    return lambda e: json.dumps(e.get(field), sort_keys=True, default=str)


def _when(value):
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    # A bare date or naive time is taken as UTC so that mixed lists compare.
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _time_fields(entries, start, end):
    if start and end:
        return start, end
    for s, e in _TIME_PAIRS:
        if any(s in x and e in x for x in entries):
            return s, e
    return None


def _overlap(a, b, args):
    fields = _time_fields(a + b, args.get("start_field"), args.get("end_field"))
    if fields is None:
        return {"ok": False, "error": {"class": "NoTimeFields",
                                       "message": "no start/end fields found; give start_field and end_field"}}
    sf, ef = fields
    skipped = 0

    def windows(entries):
        nonlocal skipped
        out = []
        for e in entries:
            s, t = _when(e.get(sf)), _when(e.get(ef))
            if s is None or t is None or t < s:
                skipped += 1
                out.append(None)
            else:
                out.append((s, t))
        return out

    wa, wb = windows(a), [w for w in windows(b) if w is not None]
    kept = [e for e, w in zip(a, wa) if w is not None and any(w[0] < y and x < w[1] for x, y in wb)]
    return {"ok": True, "entries": kept,
            "metadata": {"op": "overlap", "key": None, "count_a": len(a), "count_b": len(b),
                         "count_out": len(kept), "start_field": sf, "end_field": ef, "skipped": skipped}}


def run(args, ctx):
    op, a, b = args["op"], args["entries"], args["with_entries"]
    if op == "overlap":
        return _overlap(a, b, args)
    field = _key_field(a, b, args.get("key"))
    key = _keyer(field)
    keys_a, keys_b = {key(e) for e in a}, {key(e) for e in b}
    if op == "intersect":
        pool = [e for e in a if key(e) in keys_b]
    elif op == "difference":
        pool = [e for e in a if key(e) not in keys_b]
    elif op == "symdiff":
        pool = [e for e in a if key(e) not in keys_b] + [e for e in b if key(e) not in keys_a]
    else:
        pool = a + b
    seen, out = set(), []
    for e in pool:
        k = key(e)
        if k not in seen:
            seen.add(k)
            out.append(e)
    return {"ok": True, "entries": out,
            "metadata": {"op": op, "key": field, "count_a": len(a), "count_b": len(b), "count_out": len(out)}}
