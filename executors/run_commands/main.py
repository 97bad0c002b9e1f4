"""run_commands: one program, its arguments as a list, output and time bounded. Stdlib only.

The runtime has already checked the program against [commands] (the policy before the spawn) and
the sandbox lets the call execute the listed programs alone; the check here is the same rule seen
from inside, so a call that reached the executor some other way is refused for the same reason.
"""

import os
import selectors
import signal
import subprocess
import time

_SEARCH_PATH = ("/usr/bin", "/bin")
# Past its cap a stream is still read (so the program is not blocked on a full pipe) and thrown away,
# up to this many bytes in all; then the program is stopped.
_DRAIN_BYTES = 64 * 1024 * 1024
_HARD_TIMEOUT_S = 25.0
_ALLOW = "[commands] allow"
_SHELL = "[commands] shell"


def _fail(cls, message, **extra):
    return {"ok": False, "error": {"class": cls, "message": message}, **extra}


def _home_expanded(arg, home):
    # The one expansion a shell would make that a person writes without thinking: ~ for the home.
    if arg == "~":
        return home
    if arg.startswith("~/"):
        return home + arg[1:]
    return arg


def _find(program, shell):
    if "/" in program:
        return program if shell == "free" and os.access(program, os.X_OK) else None
    for folder in _SEARCH_PATH:
        candidate = os.path.join(folder, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _refusal(program, commands):
    shell = commands.get("shell", "forbidden")
    if shell == "forbidden":
        return _fail("Forbidden", f"{_SHELL} is \"forbidden\": no program may run; set it to \"listed\" in "
                                  f"config.toml and name the programs in {_ALLOW}")
    if shell == "listed":
        if "/" in program or any(c.isspace() for c in program):
            return _fail("InvalidArgument", f"program {program!r}: give the program's bare name (like \"du\") "
                                            "and its arguments as a list in args (like [\"-sh\", \"~/Music\"])")
        if program not in commands.get("allow", []):
            listed = ", ".join(commands.get("allow", [])) or "none"
            return _fail("NotListed", f"{program} is not in {_ALLOW} of config.toml (listed: {listed}); "
                                      "add it there to let run_commands start it")
    return None


def _collect(proc, cap, deadline):
    """stdout and stderr, each kept up to ``cap`` bytes, until the program ends or the deadline."""
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    seen = {"stdout": 0, "stderr": 0}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    timed_out = flooded = False
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=min(left, 0.5)):
            chunk = os.read(key.fileobj.fileno(), 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            name = key.data
            seen[name] += len(chunk)
            room = cap - len(kept[name])
            if room > 0:
                kept[name] += chunk[:room]
        if sum(seen.values()) > 2 * cap + _DRAIN_BYTES:
            flooded = True
            break
    sel.close()
    return kept, seen, timed_out, flooded


def _stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(args, ctx):
    commands = (ctx.get("config") or {}).get("commands") or {}
    shell = commands.get("shell", "forbidden")
    program = args["program"]
    refused = _refusal(program, commands)
    if refused:
        return refused
    path = _find(program, shell)
    if path is None:
        return _fail("NotFound", f"{program} is not installed in /usr/bin or /bin")
    home = ctx["workspace"]["home"]
    cwd = args.get("cwd") or home
    if not os.path.isdir(cwd):
        return _fail("NotFound", f"the folder {args.get('cwd') or '~'} to run in does not exist")
    argv = [path, *(_home_expanded(a, home) for a in args.get("args") or [])]
    cap = min(int(args.get("max_output_bytes") or commands.get("max_output_bytes", 65536)),
              int(commands.get("max_output_bytes", 65536)))
    limit_s = min(float(args.get("timeout_s") or commands.get("timeout_s", 20)), float(commands.get("timeout_s", 20)),
                  _HARD_TIMEOUT_S)
    env = {"PATH": ":".join(_SEARCH_PATH), "HOME": home, "LANG": "C.UTF-8",
           # git only reads here: no index refresh written, no pager, no prompt for a password.
           "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "", "PAGER": "", "GIT_TERMINAL_PROMPT": "0"}
    if os.environ.get("TZ"):
        env["TZ"] = os.environ["TZ"]
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
    except PermissionError:
        return _fail("CannotStart", f"the sandbox does not let {program} be executed: it is not in {_ALLOW}")
    except OSError as e:
        return _fail("CannotStart", f"{program} could not start: {e.strerror}")
    deadline = started + limit_s
    timed_out = flooded = True
    try:
        kept, seen, timed_out, flooded = _collect(proc, cap, deadline)
        if not (timed_out or flooded):
            # Both streams ended: the program is exiting; wait for it, within what is left of the time.
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        if timed_out or flooded:
            _stop(proc)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    out = {
        "ok": proc.returncode == 0 and not timed_out and not flooded,
        "program": program,
        "args": list(args.get("args") or []),
        "cwd": cwd,
        "exit_code": None if (timed_out or flooded) else proc.returncode,
        "stdout": kept["stdout"].decode("utf-8", "replace"),
        "stderr": kept["stderr"].decode("utf-8", "replace"),
        "truncated": {name: seen[name] > len(kept[name]) for name in kept},
        "bytes": dict(seen),
        "timed_out": timed_out,
        "duration_ms": int((time.monotonic() - started) * 1000),
    }
    cut = [f"{name} cut at {cap} of {seen[name]} bytes" for name in kept if out["truncated"][name]]
    if cut:
        out["note"] = "; ".join(cut)
    if timed_out:
        out["error"] = {"class": "TimedOut", "message": f"{program} ran past {limit_s:g} s and was stopped; "
                                                         "what it wrote before is kept"}
    elif flooded:
        out["error"] = {"class": "TooMuchOutput", "message": f"{program} wrote more than {_DRAIN_BYTES} bytes "
                                                              "and was stopped"}
    elif proc.returncode != 0:
        last = next((ln for ln in reversed(out["stderr"].splitlines()) if ln.strip()), "")
        out["error"] = {"class": "NonZeroExit", "message": f"{program} exited with {proc.returncode}"
                                                           + (f": {last[:300]}" if last else "")}
    return out
