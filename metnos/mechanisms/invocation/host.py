"""The program that runs inside the sandbox: ``python3 -I -S host.py CONFIG``.

It restricts itself (resource limits, then Landlock), loads the executor's
``main.py``, reads ``{"args": ..., "ctx": ...}`` from stdin, calls
``run(args, ctx)`` and writes the result as JSON to stdout.

Stdlib only, and no import of ``metnos``: with ``-I -S`` nothing but the
standard library is on sys.path, which is what makes the interpreter start
in ~15 ms instead of ~90 ms. Everything it needs arrives in CONFIG. ``-B``
and executor_imports keep bytecode out of the executor's folder.

Exit codes: 0 result written; 1 the executor raised or returned garbage;
2 the host itself could not set up (the executor never ran).
The last stderr line of a failure is ``METNOS-HOST-ERROR {json}``.

The result is framed, ``<length>\n<json>`` (metnos/mechanisms/invocation/frame.py): the
runtime knows it has the whole of it without waiting for the end of the
stream, which comes only once bwrap's own processes have exited as well.
"""

import json
import os
import resource
import sys

ERROR_MARK = "METNOS-HOST-ERROR "


def _fail(code, kind, message):
    try:
        sys.stdout.flush()
        sys.stderr.write("\n" + ERROR_MARK + json.dumps({"type": kind, "message": str(message)[:2000]}) + "\n")
        sys.stderr.flush()
    finally:
        os._exit(code)


def _die_with_parent():
    # bwrap's --die-with-parent covers the sandboxed case; this covers the
    # fallback, where nothing else would stop an orphan.
    try:
        # Only the unsandboxed fallback needs these; the sandboxed start loads as little as it can.
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(2)  # the parent is already gone
    except Exception:
        pass


def _limits(lim):
    def setlim(res, soft, hard=None):
        hard = soft if hard is None else hard
        try:
            resource.setrlimit(res, (soft, hard))
        except (ValueError, OSError):
            pass

    setlim(resource.RLIMIT_CORE, 0)
    if lim.get("memory_bytes"):
        setlim(resource.RLIMIT_AS, lim["memory_bytes"])
    if lim.get("cpu_s"):
        # SIGXCPU at the soft limit, SIGKILL a second later at the hard one.
        setlim(resource.RLIMIT_CPU, lim["cpu_s"], lim["cpu_s"] + 1)
    if lim.get("nofile"):
        setlim(resource.RLIMIT_NOFILE, lim["nofile"])
    if lim.get("nproc") and os.getuid() != 0:
        # Useless for root (the kernel skips the check); the pids cgroup is
        # the real cap there.
        setlim(resource.RLIMIT_NPROC, lim["nproc"])


def confine(cfg):
    """Resource limits, then Landlock, on the calling process.

    Also imported by the birth host (metnos/mechanisms/executors/birth_host.py), so that
    birth tests run under exactly the restrictions of an invocation.
    """
    _limits(cfg.get("limits") or {})
    ll = cfg.get("landlock")
    if ll:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        try:
            # Beside this file, on the path only now: the host starts with -I -S.
            import landlock

            landlock.restrict_self([tuple(r) for r in ll["rules"]], tcp_connect_ports=ll.get("tcp_ports"))
        except Exception as e:
            # Fail closed: a sandbox that was meant to have Landlock and
            # does not is not the sandbox the profile was signed for.
            _fail(2, "LandlockFailed", f"{type(e).__name__}: {e}")
        del sys.path[0]


def _through_proxy(cfg):
    """The executor's only way out: the bridge to the egress proxy, on this
    sandbox's loopback, named by the proxy variables every HTTP client reads.
    Landlock then lets TCP connect to that port alone (and bind to none)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        # Beside this file, on the path only now: the host starts with -I -S.
        import bridge

        port = bridge.start(cfg["proxy"]["fd"])
    except Exception as e:
        _fail(2, "EgressBridgeFailed", e)
    del sys.path[0]
    url = "http://127.0.0.1:%d" % port
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        os.environ[name] = url
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        os.environ.pop(name, None)
    if cfg.get("landlock"):
        cfg["landlock"]["tcp_ports"] = [port]


def executor_imports(code_dir, site_packages):
    """Make the executor's folder importable: after the standard library, and
    from source only.

    Only signed files may run, and the signature covers sources: a module
    beside main.py never shadows the standard library's (an unsigned
    ``socket.py`` is not the socket module), and bytecode is neither read from
    the folder (a planted ``__pycache__`` is ignored) nor written into it.
    Also imported by the birth host.
    """
    sys.dont_write_bytecode = True
    bx = sys.modules.get("_frozen_importlib_external")
    if bx is None:
        # An interpreter that does not freeze its import system: the frozen module stands in otherwise.
        from importlib import machinery as bx

    class SourceOnly(bx.SourceFileLoader):
        def path_stats(self, path):
            # Without the source's stats SourceLoader.get_code neither checks
            # nor writes a cache: it compiles the source, every time.
            raise OSError("executor code is never loaded from bytecode")

    root = code_dir.rstrip("/")

    def finder(path):
        if path == root or path.startswith(root + "/"):
            return bx.FileFinder(path, (SourceOnly, bx.SOURCE_SUFFIXES))
        raise ImportError("not the executor's folder")

    sys.path_hooks.insert(0, finder)
    sys.path_importer_cache.pop(root, None)
    sys.path.append(root)
    sys.path.extend(site_packages)


def load_source(name, path):
    """One module from its source file, compiled here (no bytecode cache);
    compile + exec rather than importlib.util, which costs ~3 ms to import."""
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec")
    module = type(sys)(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(code, module.__dict__)
    return module


def main():
    cfg = json.loads(sys.argv[1])
    if cfg.get("die_with_parent"):
        _die_with_parent()
    # The result channel is a private copy of stdout; fd 1 becomes stderr so
    # that a stray print() in the executor cannot corrupt the protocol.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    raw = sys.stdin.buffer.read()
    try:
        request = json.loads(raw)
        args, ctx = request["args"], request.get("ctx") or {}
    except (ValueError, KeyError, TypeError) as e:
        _fail(2, "BadRequest", e)
    if cfg.get("proxy"):
        _through_proxy(cfg)
    confine(cfg)
    code_dir = cfg["code_dir"]
    executor_imports(code_dir, list(cfg.get("site_packages") or []))
    try:
        module = load_source("main", os.path.join(code_dir, "main.py"))
        result = module.run(args, ctx)
        if not isinstance(result, dict):
            raise TypeError(f"run() returned {type(result).__name__}, not dict")
        data = json.dumps(result, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except BaseException as e:  # noqa: BLE001 - everything the executor does is reported
        if isinstance(e, SystemExit) and e.code in (0, None):
            e = RuntimeError("executor called sys.exit() without returning a result")
        # Only a failing executor pays for loading traceback; the start stays ~15 ms.
        import traceback

        traceback.print_exc()
        _fail(1, type(e).__name__, e)
    # What the executor printed is out before the result: the runtime stops
    # reading once the frame is whole.
    sys.stdout.flush()
    sys.stderr.flush()
    view = memoryview(b"%d\n" % len(data) + data)
    while view:
        n = os.write(out_fd, view)
        view = view[n:]
    os.close(out_fd)
    # Skip atexit hooks and non-daemon threads the executor may have left.
    os._exit(0)


if __name__ == "__main__":
    main()
