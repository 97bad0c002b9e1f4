"""sort_entries: stable sort on one field; mixed types never raise."""


def _rank(value):
    # Numbers before text before anything else, so a mixed column still sorts.
    if isinstance(value, bool):
        return (2, str(value))
    if isinstance(value, (int, float)):
        return (0, value)
    if isinstance(value, str):
        return (1, value.casefold())
    return (2, repr(value))


def run(args, ctx):
    entries, field = args["entries"], args["field"]
    desc = args.get("order", "asc") == "desc"
    present = [e for e in entries if e.get(field) is not None]
    missing = [e for e in entries if e.get(field) is None]
    # reverse=True keeps equal keys in input order: the sort stays stable.
    ordered = sorted(present, key=lambda e: _rank(e[field]), reverse=desc)
    out = ordered + missing
    limit = args.get("limit")
    if limit is not None:
        out = out[:limit]
    return {"ok": True, "entries": out,
            "metadata": {"field": field, "order": "desc" if desc else "asc", "count_in": len(entries),
                         "count_out": len(out), "missing_field": len(missing)}}

