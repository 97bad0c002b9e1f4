"""describe_entries: entries to text, deterministically (no model in the loop)."""

import json


def _text(value, limit):
    if isinstance(value, str):
        s = value
    elif value is None:
        s = ""
    else:
        s = json.dumps(value, ensure_ascii=False, sort_keys=True)
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _fields(entries, wanted):
    if wanted:
        return list(wanted)
    seen = {}
    for e in entries:
        for k in e:
            seen.setdefault(k, None)
    return list(seen)


def _with_values(entries):
    """The entries' field names with a value, in first-seen order: what an error offers instead."""
    seen = {}
    for e in entries[:200]:
        for k, v in e.items():
            if v is not None and v != "":
                seen.setdefault(k, None)
    return list(seen)


def run(args, ctx):
    entries = args["entries"]
    limit, width = args.get("max_entries", 50), args.get("max_value_chars", 200)
    fields = _fields(entries, args.get("fields"))
    # A field asked for that no entry has a value in would show the user empty cells as if they were the data.
    have = _with_values(entries)
    empty = [f for f in fields if f not in have]
    if entries and args.get("fields") and empty:
        return {"ok": False, "error": {"class": "NoSuchField", "message":
                f"none of the {len(entries)} entries has a value in {', '.join(map(repr, empty))}; their fields are {have}"}}
    shown, omitted = entries[:limit], max(0, len(entries) - limit)
    lines = []
    if args.get("title"):
        lines += [f"**{args['title']}**", ""]
    if not entries:
        lines.append("(nothing)")
    elif args.get("format", "list") == "table":
        cell = lambda v: _text(v, width).replace("|", "\\|")
        lines.append("| " + " | ".join(cell(f) for f in fields) + " |")
        lines.append("|" + "---|" * len(fields))
        lines += ["| " + " | ".join(cell(e.get(f)) for f in fields) + " |" for e in shown]
    else:
        for e in shown:
            parts = [f"{f}: {_text(e[f], width)}" for f in fields if f in e]
            lines.append("- " + ("; ".join(parts) if parts else "(no fields)"))
    if omitted:
        lines += ["", f"… and {omitted} more"]
    return {"ok": True, "content": "\n".join(lines),
            "metadata": {"shown": len(shown), "omitted": omitted, "fields": fields}}
