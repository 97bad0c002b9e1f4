"""Child-process host for an executor's birth tests.

Run as a script (``python -I -S birth_host.py [CONFIG]``), never imported by
the loader: it must work with the standard library alone, as executors do
inside the sandbox. It reads one JSON request on stdin
``{"executor_dir": str, "tmp": str, "ctx": {...}}``, runs every ``birth_*``
function of ``tests/birth.py`` in definition order and writes one JSON
report on the original stdout. The executor's own prints go to stderr so
they cannot forge the report.

CONFIG, given when it runs in the sandbox (metnos.mechanisms.invocation.birth), is the
invocation host's config plus ``host_dir``, where that host is bound: the
birth host confines itself with the host's own code before loading anything.
Sandboxed or not, it imports the executor's code as the invocation host
does: its folder after the standard library, from source, no bytecode.
"""

import copy
import json
import os
import sys
import traceback
import pathlib

# Where the invocation host is outside the sandbox; inside, CONFIG says.
_HOST_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "invocation")


def _merge(base, over):
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _where(tb):
    # The innermost frame inside birth.py is where the failing assert is.
    frames = [f for f in traceback.extract_tb(tb) if f.filename.endswith("birth.py")]
    return f" (tests/birth.py:{frames[-1].lineno})" if frames else ""


def _host(cfg):
    """The invocation host's module: its confinement and its import rules,
    so a birth runs under exactly those of an invocation."""
    sys.path.insert(0, cfg["host_dir"] if cfg else _HOST_DIR)
    # The invocation host is found on the path just inserted, inside the sandbox or out.
    import host

    del sys.path[0]
    return host


def _prepare(request):
    cfg = json.loads(sys.argv[1]) if len(sys.argv) > 1 else None
    host = _host(cfg)
    if cfg:
        # The executor is bound at its own place inside the sandbox.
        request["executor_dir"] = cfg["code_dir"]
        host.confine(cfg)
    host.executor_imports(request["executor_dir"], list((cfg or {}).get("site_packages") or []))
    return host


def main():
    request = json.loads(sys.stdin.read())
    report_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # The executor dir is signed: no __pycache__ may appear in it.
    sys.dont_write_bytecode = True
    host = _prepare(request)
    report = {"tests": [], "fatal": None}
    try:
        code = host.load_source("executor_main", os.path.join(request["executor_dir"], "main.py"))
        tests = host.load_source("executor_birth", os.path.join(request["executor_dir"], "tests", "birth.py"))
    except BaseException as exc:  # the import itself may run broken code
        report["fatal"] = f"import failed: {type(exc).__name__}: {exc}"
        report_out.write(json.dumps(report))
        return
    if not callable(getattr(code, "run", None)):
        report["fatal"] = "main.py defines no run(args, ctx)"
    functions = [(n, f) for n, f in vars(tests).items() if n.startswith("birth_") and callable(f)]
    if not functions and not report["fatal"]:
        report["fatal"] = "tests/birth.py defines no birth_* function"
    if report["fatal"]:
        report_out.write(json.dumps(report))
        return


    for name, fn in functions:
        tmp = pathlib.Path(request["tmp"]) / name
        (tmp / "outbox").mkdir(parents=True)
        # In a birth test the scratch dir is the executor's whole world.
        base_ctx = _merge(request["ctx"], {
            "workspace": {"home": str(tmp), "root": str(tmp), "read": [str(tmp)], "write": [str(tmp)]},
            "outbox_dir": str(tmp / "outbox"),
        })
        calls = []

        def run(args, _calls=calls, _ctx=base_ctx, **overrides):
            ctx = _merge(copy.deepcopy(_ctx), overrides)
            sent = json.loads(json.dumps(args))
            result = code.run(sent, ctx)
            try:
                result = json.loads(json.dumps(result))
            except (TypeError, ValueError) as exc:
                raise AssertionError(f"run() returned something that is not JSON: {exc}") from None
            _calls.append({"args": sent, "result": result})
            return result

        entry = {"name": name, "ok": True, "error": None, "calls": calls}
        try:
            fn(run, tmp)
        except BaseException as exc:
            entry["ok"] = False
            entry["error"] = f"{type(exc).__name__}: {exc}{_where(exc.__traceback__)}"
        report["tests"].append(entry)
    report_out.write(json.dumps(report))
    report_out.flush()


if __name__ == "__main__":
    main()
