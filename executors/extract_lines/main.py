"""extract_lines: lines by position, so that "the last three lines" is worked out, not guessed."""

import re


# An item of a list written in text: "- x", "* x", "+ x", "1. x", "2) x".
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,4}[.)])\s+(?P<item>\S.*)$")


def _texts(args):
    if "content" in args:
        return [(None, args["content"])]
    out = []
    for entry in args.get("entries") or []:
        content = entry.get("content") if isinstance(entry, dict) else None
        if isinstance(content, str):
            out.append((entry.get("path"), content))
    return out


def _window(total, args):
    """The 0-based slice of ``total`` lines the arguments ask for."""
    if "last" in args:
        return max(0, total - args["last"]), total
    if "first" in args:
        return 0, min(total, args["first"])
    start = args.get("start", 1)
    end = args.get("end", total)
    return min(total, start - 1), min(total, max(end, start - 1))


def run(args, ctx):
    given = [k for k in ("first", "last") if k in args] + (["start/end"] if "start" in args or "end" in args else [])
    if len(given) != 1:
        return {"ok": False, "error": {"class": "NoPosition", "message":
                "give exactly one of: first (the first N lines), last (the last N lines), or start/end (a range)"}}
    texts = _texts(args)
    if not texts:
        return {"ok": False, "error": {"class": "NoInput", "message":
                "no text to take lines from: give content, or the entries of a step that read files (from_step)"}}
    entries, parts, lines_in = [], [], 0
    for path, text in texts:
        # A final newline ends the last line; it does not start an empty one.
        numbered = list(enumerate(text.splitlines(), 1))
        if args.get("items"):
            # The items of a list, without their markers: a heading or a blank line is no item.
            numbered = [(n, m.group("item")) for n, line in numbered if (m := _ITEM.match(line))]
        lines = [line for _, line in numbered]
        lines_in += len(lines)
        lo, hi = _window(len(lines), args)
        for number in range(lo, hi):
            entry = {"line": numbered[number][0], "text": lines[number]}
            if path is not None:
                entry["path"] = path
            entries.append(entry)
        parts.append("\n".join(lines[lo:hi]))
    return {"ok": True, "entries": entries, "content": "\n\n".join(parts),
            "metadata": {"lines_in": lines_in, "lines_out": len(entries), "texts": len(texts)}}
