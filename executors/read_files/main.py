"""read_files: text content of files, one entry each. Stdlib only."""

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


def _targets(args):
    paths = list(args.get("paths") or [])
    paths += [e["path"] for e in args.get("entries") or [] if isinstance(e.get("path"), str)]
    return paths


def _read_one(raw, ctx, max_bytes, encoding):
    try:
        path = _resolve(raw, ctx)
    except ValueError as exc:
        return {"path": raw, "error": {"class": "InvalidPath", "message": str(exc)}}
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        return {"path": path, "error": {"class": "NotFound", "message": f"{raw} does not exist"}}
    except IsADirectoryError:
        return {"path": path, "error": {"class": "IsADirectory", "message": f"{raw} is a folder"}}
    except PermissionError:
        return {"path": path, "error": {"class": "PermissionDenied", "message": f"cannot read {raw}"}}
    if b"\x00" in data[:8192]:
        return {"path": path, "error": {"class": "Binary", "message": f"{raw} is not a text file"}}
    truncated = len(data) > max_bytes
    # A cut may split a multi-byte character: replace, never fail on it.
    text = data[:max_bytes].decode(encoding, errors="replace")
    # Its lines counted here, so that "how many lines" is a figure a step gave, not the model's count.
    return {"path": path, "content": text, "size": size, "truncated": truncated, "lines": len(text.splitlines())}


def run(args, ctx):
    targets = _targets(args)
    if not targets:
        return {"ok": False, "error": {"class": "NoInput", "message": "give paths or entries with a 'path'"}}
    max_bytes = args.get("max_bytes", 1048576)
    encoding = args.get("encoding", "utf-8")
    try:
        "".encode(encoding)
    except LookupError:
        # Read as another encoding than asked, a file's text would be wrong without a word said.
        return {"ok": False, "error": {"class": "UnknownEncoding", "message": (
            f"{encoding!r} is not a text encoding this system knows; nothing was read. Give one such as "
            "utf-8, latin-1, cp1252 or utf-16, or leave encoding out to read utf-8")}}
    entries = [_read_one(p, ctx, max_bytes, encoding) for p in targets]
    failed = [e for e in entries if "error" in e]
    out = {"ok": not failed, "entries": entries,
           "metadata": {"ok_count": len(entries) - len(failed), "fail_count": len(failed)}}
    if len(entries) == 1 and not failed:
        out["content"] = entries[0]["content"]
    if failed:
        first = failed[0]["error"]
        out["error"] = {"class": first["class"],
                        "message": f"{len(failed)} of {len(entries)} failed; first: {first['message']}"}
    return out
