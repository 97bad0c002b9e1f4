"""find_files: name-pattern search under one folder. Stdlib only (sandbox runs -I -S)."""

import fnmatch
import os
import stat
from datetime import datetime, timezone


def _resolve(path, ctx):
    # Executors cannot import Metnos, so each carries this small copy.
    ws = ctx["workspace"]
    for prefix, base in (("~", ws["home"]), ("$HOME", ws["home"]), ("$WORKSPACE", ws["root"])):
        if path == prefix or path.startswith(prefix + "/"):
            path = base + path[len(prefix):]
            break
    if not os.path.isabs(path):
        raise ValueError(f"{path!r} is not absolute (use /..., ~/... or $WORKSPACE/...)")
    return os.path.normpath(path)


def _error(cls, message):
    return {"ok": False, "error": {"class": cls, "message": message}}


def _kind(mode):
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def run(args, ctx):
    try:
        base = _resolve(args["base_path"], ctx)
    except ValueError as exc:
        return _error("InvalidPath", str(exc))
    if not os.path.lexists(base):
        return _error("NotFound", f"{args['base_path']} does not exist")
    if not os.path.isdir(base):
        return _error("NotADirectory", f"{args['base_path']} is not a folder")
    if not os.access(base, os.R_OK | os.X_OK):
        return _error("PermissionDenied", f"cannot read {args['base_path']}")
    pattern = args.get("pattern", "*")
    recursive = args.get("recursive", True)
    include_dirs = args.get("include_dirs", False)
    include_hidden = args.get("include_hidden", False)
    case_sensitive = args.get("case_sensitive", False)
    limit = args.get("max_results", 1000)
    if not case_sensitive:
        pattern = pattern.lower()
    if not any(c in pattern for c in "*?["):
        # A bare word is a part of the name, as for fd and most file finders: told
        # "with 'x' in their name", a model passes "x", which as a glob matches only "x".
        pattern = f"*{pattern}*"

    found, unreadable = [], 0
    stack = [base]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError:
            unreadable += 1
            continue
        subdirs = []
        for item in items:
            if not include_hidden and item.name.startswith("."):
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                unreadable += 1
                continue
            kind = _kind(st.st_mode)
            # Symlinked folders are listed, never walked: no loops, no escape.
            if kind == "dir" and recursive:
                subdirs.append(item.path)
            if kind == "dir" and not include_dirs:
                continue
            name = item.name if case_sensitive else item.name.lower()
            if fnmatch.fnmatchcase(name, pattern):
                found.append({
                    "path": item.path,
                    "name": item.name,
                    "size": st.st_size,
                    "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat(timespec="seconds"),
                    "type": kind,
                })
        stack.extend(reversed(subdirs))
    found.sort(key=lambda e: e["path"])
    truncated = len(found) > limit
    return {
        "ok": True,
        "entries": found[:limit],
        "metadata": {"count": min(len(found), limit), "truncated": truncated,
                     "base_path": base, "unreadable": unreadable},
    }
