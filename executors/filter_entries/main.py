"""filter_entries: one list in, the matching part out (seeds/001 list operators)."""

import fnmatch
import re


def _matcher(predicate, value, case_sensitive):
    if predicate == "where_regex":
        flags = 0 if case_sensitive else re.IGNORECASE
        rx = re.compile(value, flags)
        return lambda s: rx.search(s) is not None
    if not case_sensitive:
        value = value.lower()
    fold = (lambda s: s) if case_sensitive else str.lower
    if predicate == "where_starts_with":
        return lambda s: fold(s).startswith(value)
    if predicate == "where_contains":
        return lambda s: value in fold(s)
    return lambda s: fnmatch.fnmatchcase(fold(s), value)


def run(args, ctx):
    entries, field = args["entries"], args.get("field", "name")
    try:
        match = _matcher(args["predicate"], args["value"], args.get("case_sensitive", False))
    except re.error as exc:
        return {"ok": False, "error": {"class": "BadPattern", "message": f"bad regular expression: {exc}"}}
    negate = args.get("negate", False)
    kept, missing = [], 0
    for entry in entries:
        value = entry.get(field)
        if value is None:
            missing += 1
            continue
        text = value if isinstance(value, str) else str(value)
        if match(text) != negate:
            kept.append(entry)
    if entries and missing == len(entries):
        # Not one entry has the field: an empty result would read as "nothing matches".
        fields = sorted({k for e in entries if isinstance(e, dict) for k in e})
        return {"ok": False, "error": {"class": "NoSuchField", "message":
                f"none of the {len(entries)} entries has the field {field!r}; their fields are: {', '.join(fields)}"}}
    return {
        "ok": True,
        "entries": kept,
        "metadata": {"count_in": len(entries), "count_out": len(kept), "missing_field": missing,
                     "predicate": args["predicate"], "field": field},
    }
