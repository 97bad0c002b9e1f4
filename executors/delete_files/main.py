"""delete_files: plain deletion; undo is the runtime's before-image, not a trash dir. Stdlib only."""

import os
import shutil


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


def _fail(path, cls, message):
    return {"path": path, "deleted": False, "error": {"class": cls, "message": message}}


def _delete_one(raw, ctx, recursive):
    try:
        path = _resolve(raw, ctx)
    except ValueError as exc:
        return _fail(raw, "InvalidPath", str(exc))
    if path in ("/", ctx["workspace"]["home"], ctx["workspace"]["root"]):
        return _fail(path, "InvalidPath", f"refusing to delete {raw} itself")
    try:
        if os.path.islink(path):
            kind = "symlink"
            os.unlink(path)
        elif os.path.isdir(path):
            kind = "dir"
            if recursive:
                shutil.rmtree(path)
            else:
                os.rmdir(path)
        else:
            kind = "file"
            os.unlink(path)
    except FileNotFoundError:
        return _fail(path, "NotFound", f"{raw} does not exist")
    except OSError as exc:
        if isinstance(exc, PermissionError):
            return _fail(path, "PermissionDenied", f"cannot delete {raw}")
        if os.path.isdir(path) and not recursive:
            return _fail(path, "NotEmpty", f"{raw} is a folder with content (use recursive)")
        raise
    return {"path": path, "type": kind, "deleted": True}


def run(args, ctx):
    targets = list(args.get("paths") or [])
    targets += [e["path"] for e in args.get("entries") or [] if isinstance(e.get("path"), str)]
    if not targets:
        return {"ok": False, "error": {"class": "NoInput", "message": "give paths or entries with a 'path'"}}
    recursive = args.get("recursive", False)
    entries = [_delete_one(p, ctx, recursive) for p in targets]
    failed = [e for e in entries if "error" in e]
    out = {"ok": not failed, "entries": entries,
           "metadata": {"ok_count": len(entries) - len(failed), "fail_count": len(failed)}}
    if failed:
        first = failed[0]["error"]
        out["error"] = {"class": first["class"],
                        "message": f"{len(failed)} of {len(entries)} failed; first: {first['message']}"}
    return out
