"""write_files: create, overwrite or append text files. Stdlib only."""

import os


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
    return {"path": path, "error": {"class": cls, "message": message}}


def _write_one(spec, ctx, make_parents):
    raw, mode = spec["path"], spec.get("mode", "create")
    try:
        path = _resolve(raw, ctx)
    except ValueError as exc:
        return _fail(raw, "InvalidPath", str(exc))
    data = spec["content"].encode("utf-8")
    parent = os.path.dirname(path)
    try:
        if make_parents:
            os.makedirs(parent, exist_ok=True)
        existed = os.path.lexists(path)
        if mode == "create":
            # O_EXCL: "create" must never clobber, even if the file appears now.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        elif mode == "overwrite":
            # Write beside and swap, so a crash never leaves half a file.
            tmp = path + ".metnos-tmp"
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        else:
            with open(path, "ab") as fh:
                fh.write(data)
    except FileExistsError:
        return _fail(path, "Exists", f"{raw} already exists (use mode 'overwrite' or 'append')")
    except FileNotFoundError:
        return _fail(path, "NotFound", f"the folder of {raw} does not exist")
    except IsADirectoryError:
        return _fail(path, "IsADirectory", f"{raw} is a folder")
    except PermissionError:
        return _fail(path, "PermissionDenied", f"cannot write {raw}")
    return {"path": path, "mode": mode, "bytes_written": len(data), "created": not existed}


def run(args, ctx):
    make_parents = args.get("make_parents", True)
    entries = [_write_one(spec, ctx, make_parents) for spec in args["files"]]
    failed = [e for e in entries if "error" in e]
    out = {"ok": not failed, "entries": entries,
           "metadata": {"ok_count": len(entries) - len(failed), "fail_count": len(failed)}}
    if failed:
        first = failed[0]["error"]
        out["error"] = {"class": first["class"],
                        "message": f"{len(failed)} of {len(entries)} failed; first: {first['message']}"}
    return out
