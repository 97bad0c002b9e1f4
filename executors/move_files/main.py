"""move_files: rename or move into a folder, never clobbering by default. Stdlib only."""

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


def _same_file(path, ctx):
    try:
        return _resolve(path, ctx)
    except ValueError:
        return path


def _plan(args, ctx):
    moves = [(m["src"], m["dst"]) for m in args.get("moves") or []]
    sources = list(args.get("paths") or [])
    sources += [e["path"] for e in args.get("entries") or [] if isinstance(e.get("path"), str)]
    if sources and not args.get("dest_dir"):
        raise ValueError("paths or entries need a dest_dir")
    # A file given an explicit move and named again among the paths is moved once, where its move
    # says: moved a second time, it is gone, and the call would fail on a rename that was done.
    planned = {_same_file(src, ctx) for src, _ in moves}
    for src in sources:
        if _same_file(src, ctx) in planned:
            continue
        planned.add(_same_file(src, ctx))
        moves.append((src, args["dest_dir"].rstrip("/") + "/" + os.path.basename(src.rstrip("/"))))
    return moves


def _fail(src, cls, message, dst=None):
    out = {"src": src, "error": {"class": cls, "message": message}}
    if dst:
        out["dst"] = dst
    return out


def _move_one(raw_src, raw_dst, ctx, overwrite, make_parents):
    try:
        src, dst = _resolve(raw_src, ctx), _resolve(raw_dst, ctx)
    except ValueError as exc:
        return _fail(raw_src, "InvalidPath", str(exc))
    if not os.path.lexists(src):
        return _fail(src, "NotFound", f"{raw_src} does not exist", dst)
    if src == dst:
        return {"src": src, "dst": dst}
    if os.path.lexists(dst) and (not overwrite or os.path.isdir(dst)):
        return _fail(src, "Exists", f"{raw_dst} already exists", dst)
    if dst.startswith(src.rstrip("/") + "/"):
        return _fail(src, "InvalidPath", f"cannot move {raw_src} inside itself", dst)
    try:
        if make_parents:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
        # shutil.move falls back to copy+delete across file systems.
        shutil.move(src, dst)
    except FileNotFoundError:
        return _fail(src, "NotFound", f"the folder of {raw_dst} does not exist", dst)
    except PermissionError:
        return _fail(src, "PermissionDenied", f"cannot move {raw_src} to {raw_dst}", dst)
    return {"src": src, "dst": dst}


def run(args, ctx):
    try:
        moves = _plan(args, ctx)
    except ValueError as exc:
        return {"ok": False, "error": {"class": "NoInput", "message": str(exc)}}
    if not moves:
        return {"ok": False, "error": {"class": "NoInput", "message": "give moves, or paths/entries and dest_dir"}}
    overwrite, make_parents = args.get("overwrite", False), args.get("make_parents", True)
    entries = [_move_one(s, d, ctx, overwrite, make_parents) for s, d in moves]
    failed = [e for e in entries if "error" in e]
    out = {"ok": not failed, "entries": entries,
           "metadata": {"ok_count": len(entries) - len(failed), "fail_count": len(failed)}}
    if failed:
        first = failed[0]["error"]
        out["error"] = {"class": first["class"],
                        "message": f"{len(failed)} of {len(entries)} failed; first: {first['message']}"}
    return out
