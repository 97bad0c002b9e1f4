"""compute_entries: a list in, one scalar out (seeds/001 list operators)."""

import math


def _number(v):
    # bool is an int in Python, but True is not a quantity.
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v if math.isfinite(v) else None
    if isinstance(v, str):
        try:
            f = float(v.strip())
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _fields(entries):
    """The entries' field names with a value, in first-seen order: what an error offers instead."""
    seen = {}
    for e in entries[:200]:
        for k, v in e.items():
            if v is not None:
                seen.setdefault(k, None)
    return list(seen)


def run(args, ctx):
    op, entries, field = args["op"], args["entries"], args.get("field")
    if op == "count":
        if field:
            if entries and not any(field in e for e in entries):
                # A count of 0 for a field no entry has would read as an answer; it is a wrong field.
                return {"ok": False, "error": {"class": "NoField", "message":
                        f"none of the {len(entries)} entries has the field {field!r}; their fields are {_fields(entries)}"}}
            used = sum(1 for e in entries if e.get(field) is not None)
            return {"ok": True, "content": used, "metadata": {"op": op, "field": field, "count_used": used,
                                                             "count_skipped": len(entries) - used}}
        return {"ok": True, "content": len(entries),
                "metadata": {"op": op, "field": None, "count_used": len(entries), "count_skipped": 0}}
    if not field:
        return {"ok": False, "error": {"class": "NoField", "message": f"op {op!r} needs a field: one of {_fields(entries)}"}}
    raw = [e.get(field) for e in entries if e.get(field) is not None]
    numbers = [n for n in (_number(v) for v in raw) if n is not None]
    values = numbers
    # min/max over text (ISO dates, names) when no value is numeric.
    if op in ("min", "max") and not numbers and raw and all(isinstance(v, str) for v in raw):
        values = raw
    if not values:
        return {"ok": False, "error": {"class": "NoValues",
                                       "message": f"no usable values in field {field!r}; the entries' fields are {_fields(entries)}"}}
    if op == "sum":
        result = math.fsum(values)
    elif op == "average":
        result = math.fsum(values) / len(values)
    elif op == "min":
        result = min(values)
    else:
        result = max(values)
    if isinstance(result, float) and result.is_integer() and all(isinstance(v, int) for v in values):
        result = int(result)
    return {"ok": True, "content": result,
            "metadata": {"op": op, "field": field, "count_used": len(values),
                         "count_skipped": len(entries) - len(values)}}
