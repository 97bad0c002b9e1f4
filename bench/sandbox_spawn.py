"""Spawn cost of a sandboxed invocation against a plain subprocess spawn.

    python bench/sandbox_spawn.py [--runs N] [--fences [NAME ...]] [--cpu]

The baseline is the same work with no fence at all: the same interpreter,
with the same flags, runs the same invocation host (host.py) and the same
executor, fed the same request through a pipe, with ``subprocess.run``. The
host gets a configuration with its own fences left out too (no resource
limits, no parent-death signal): those are part of what is measured, not of
the baseline. Against it:

  invoke()      the whole sandboxed invocation as the runtime makes it:
                schema and policy checks, the plan, the invocation cgroup
                (pids and memory caps), bwrap with its uid, seccomp and
                Landlock, the drain under the caps until the result frame is
                whole, the kill; the sandbox's teardown (its processes
                exiting, bwrap reaped, the cgroup removed) is left to the
                runtime's finisher thread, as in use, and waited for after
                each call outside the time measured;  <- the figure
  invoke() off  the same with METNOS_SANDBOX=0: the runtime's own part
                (checks, cgroup, the host's own limits), without bubblewrap;
  bwrap only    the host command wrapped in bwrap (seccomp fd, Landlock
                inside) run with subprocess.run: bubblewrap's own part.

``--fences`` adds one bwrap-only variant per fence, with that fence alone
left out, and prints what each costs (bwrap only minus the variant; for a
flag the sandbox no longer passes, such as ``+new-session``, the variant
with it added back minus bwrap only: what leaving it out saves), plus
bwrap's floor (a bare ``bwrap --dev-bind / /``, no namespace asked for);
``--fences NAME ...`` measures only those, named without their dashes
(e.g. ``--fences new-session landlock``).

``--cpu`` measures CPU time instead of wall time, which a loaded machine
disturbs far less: for the spawned commands, the task-clock of every process
of the spawn (``perf stat``, which follows bwrap's children that bwrap never
reaps); for invoke(), the runtime's own process (``time.process_time``: the
calling thread and the finisher thread that tears the sandbox down), its
children being the bwrap-only command's.

The variants are sampled in turn (one of each, N times) so that a change in
the machine's load touches them all alike; each figure is the median, with
the 25th and 75th percentiles, and the fastest run (the least disturbed by
the machine's load; its ratio is against the fastest plain spawn). Target:
invoke() at most 1.3 times the plain spawn, median against median.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from metnos.mechanisms.invocation.pump import finished
from metnos.mechanisms.invocation.runner import host_config, invoke
from metnos.mechanisms.sandbox.bwrap import SandboxPlan, dev_args, plan_for, probe, python_runtime, wrap_plan
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.mechanisms.sandbox.status import status
from metnos.settings.workspace import Workspace

MAIN = "def run(args, ctx):\n    return {'echo': args.get('x')}\n"
REQUEST = b'{"args": {"x": 1}, "ctx": {}}'
TARGET = 1.3
# The bwrap flags that make each fence, with how many arguments follow each
# (a hostname needs the uts namespace).
FENCE_FLAGS: dict[str, tuple[tuple[str, int], ...]] = {
    "--unshare-net": (("--unshare-net", 0),),
    "--unshare-ipc": (("--unshare-ipc", 0),),
    "--unshare-uts": (("--unshare-uts", 0), ("--hostname", 1)),
    "--unshare-cgroup-try": (("--unshare-cgroup-try", 0),),
    "--die-with-parent": (("--die-with-parent", 0),),
    "--cap-drop": (("--cap-drop", 1),),
    "--proc": (("--proc", 1),),
}
# Flags the sandbox no longer passes, measured added back: what leaving each
# out saves (--new-session: a session of its own, the kernel's autogroup; --disable-userns: a
# nested user namespace, left to the seccomp filter where there is one).
ADDED_FLAGS: dict[str, tuple[str, ...]] = {"+new-session": ("--new-session",), "+as-pid-1": ("--as-pid-1",),
                                           "+disable-userns": ("--disable-userns",)}


def interleaved(variants: dict[str, Callable[[], float | None]], runs: int, *, cpu: bool) -> dict[str, list[float]]:
    """ms per run of each variant: wall time, or (``cpu``) what the variant
    reports, the runtime's own thread time when it reports nothing."""
    for fn in variants.values():
        fn()  # warm caches (probe, BPF, page cache)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    clock = time.thread_time if cpu else time.perf_counter
    for _ in range(runs):
        for name, fn in variants.items():
            t = clock()
            measured = fn()
            samples[name].append(measured if measured is not None else (clock() - t) * 1000)
    return samples


def spread(s: list[float]) -> tuple[float, float, float, float]:
    q1, _, q3 = statistics.quantiles(s, n=4)
    return statistics.median(s), q1, q3, min(s)


def without(argv: Sequence[str], flags: Sequence[tuple[str, int]]) -> list[str]:
    out = list(argv)
    for flag, nargs in flags:
        i = out.index(flag)
        del out[i:i + 1 + nargs]
    return out


def without_run(argv: Sequence[str], run: Sequence[str]) -> list[str]:
    """``argv`` without the first occurrence of the consecutive ``run``."""
    out, k = list(argv), len(run)
    i = next(i for i in range(len(out) - k + 1) if out[i:i + k] == list(run))
    return out[:i] + out[i + k:]


def run_ok(argv: list[str], env: dict[str, str], pass_fds: Sequence[int] = (), *, cpu: bool = False) -> float | None:
    """Run ``argv`` on the request; with ``cpu``, return the task-clock (ms)
    of it and every process below it."""
    prefix = ["perf", "stat", "-x,", "-e", "task-clock", "--"] if cpu else []
    r = subprocess.run(prefix + argv, input=REQUEST, capture_output=True, env=env, pass_fds=pass_fds)
    assert r.returncode == 0, r.stderr
    if not cpu:
        return None
    line = next(ln for ln in reversed(r.stderr.decode().splitlines()) if "task-clock" in ln)
    return float(line.split(",")[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--fences", nargs="*", metavar="NAME",
                    help="also measure each fence alone (or only the fences named)")
    ap.add_argument("--cpu", action="store_true", help="CPU time (perf stat task-clock) instead of wall time")
    opts = ap.parse_args()
    n, cpu = opts.runs, opts.cpu
    if not probe().works:
        print(f"bwrap cannot run here ({probe().error}); nothing to compare")
        return 1
    if cpu and shutil.which("perf") is None:
        print("--cpu needs perf (linux-perf) on PATH")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        code = Path(tmp) / "echo"
        code.mkdir()
        (code / "main.py").write_text(MAIN)
        on = {k: v for k, v in os.environ.items() if k != "METNOS_SANDBOX"}
        on["METNOS_HOME"] = str(Path(tmp) / "home")
        off = dict(on, METNOS_SANDBOX="0")
        ws = Workspace.from_env(on)
        profile = SandboxProfile()
        exe, _, _ = python_runtime()
        plain_plan = plan_for(code, profile, workspace=ws, env=off)
        bare = json.loads(host_config(plain_plan, profile))
        for own_fence in ("limits", "die_with_parent"):
            bare.pop(own_fence)
        plain_cmd = [exe, "-I", "-S", "-B", plain_plan.host_path, json.dumps(bare)]
        boxed_plan = plan_for(code, profile, workspace=ws, env=on)

        def boxed(plan: SandboxPlan = boxed_plan, drop: Sequence[tuple[str, int]] = (),
                  drop_run: Sequence[str] = (), add: Sequence[str] = ()) -> Callable[[], float | None]:
            cmd = [exe, "-I", "-S", "-B", plan.host_path, host_config(plan, profile)]

            def go() -> float | None:
                w = wrap_plan(plan, cmd)
                argv = without(w.argv, drop)
                if drop_run:
                    argv = without_run(argv, drop_run)
                argv[1:1] = add
                try:
                    return run_ok(argv, w.env, w.pass_fds, cpu=cpu)
                finally:
                    w.close()
            return go

        def inv(env: dict[str, str]) -> Callable[[], float]:
            # CPU: the runtime's whole process, its finisher thread included,
            # so the finisher is waited for inside the time (a wait costs no
            # CPU). Wall time: the finisher is waited for after, outside the
            # time measured, or it would run beside the next variant's spawn
            # (a plain one, as often as not) and slow that one instead.
            clock = time.process_time if cpu else time.perf_counter

            def go() -> float:
                t = clock()
                out = invoke(code, profile, {"x": 1}, workspace=ws, env=env)
                if cpu:
                    assert finished(timeout=10)
                took = (clock() - t) * 1000
                assert out.ok, out
                assert finished(timeout=10)
                return took
            return go

        variants: dict[str, Callable[[], float | None]] = {
            "plain": lambda: run_ok(plain_cmd, plain_plan.child_env, cpu=cpu),
            "invoke": inv(on), "invoke_off": inv(off), "bwrap": boxed(),
        }
        if cpu:
            # The runtime's side of a plain spawn, to set against invoke()'s.
            variants["plain_parent"] = lambda: run_ok(plain_cmd, plain_plan.child_env)
        fences: dict[str, Callable[[], float | None]] = {}
        if opts.fences is not None:
            fences = {fence: boxed(drop=flags) for fence, flags in FENCE_FLAGS.items()}
            fences["dev"] = boxed(drop_run=dev_args())
            fences.update({name: boxed(add=flags) for name, flags in ADDED_FLAGS.items()})
            fences["seccomp"] = boxed(dataclasses.replace(boxed_plan, seccomp=False))
            fences["landlock"] = boxed(dataclasses.replace(boxed_plan, landlock_path=None))
            floor = [probe().path or "bwrap", "--dev-bind", "/", "/", "--", *plain_cmd]
            fences["floor"] = lambda: run_ok(floor, plain_plan.child_env, cpu=cpu)
            names = {k.lstrip("-+"): k for k in fences}
            unknown = set(opts.fences) - set(names)
            if unknown:
                print(f"unknown fence(s): {', '.join(sorted(unknown))}; known: {', '.join(names)}")
                return 1
            if opts.fences:
                fences = {names[k]: fences[names[k]] for k in opts.fences}
            variants.update(fences)
        layers = invoke(code, profile, {"x": 1}, workspace=ws, env=on).layers
        load0 = os.getloadavg()[0]
        samples = interleaved(variants, n, cpu=cpu)
        load1 = os.getloadavg()[0]

    m = {k: spread(v) for k, v in samples.items()}
    base = m["plain"][0]
    print(f"runs per figure: {n} (median [p25-p75] ratio, fastest ratio; sampled in turn);"
          f" load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} cores")
    print(f"layers of the sandboxed invocation: {', '.join(layers)} (memory cap: {status().memory_cap})")

    def line(label: str, key: str, note: str = "") -> None:
        med, q1, q3, low = m[key]
        print(f"{label:28s}{med:6.1f} ms [{q1:5.1f}-{q3:5.1f}]   {med / base:.2f}"
              f"   fastest {low:5.1f} ms {low / m['plain'][3]:.2f}{note}")

    if cpu:
        print("CPU time: the spawned processes (perf task-clock) and the runtime's own (its threads)")
        line("plain spawn, processes", "plain")
        line("bwrap only, processes", "bwrap")
        parent, own = m["plain_parent"][0], m["invoke"][0]
        print(f"runtime: plain spawn {parent:.2f} ms, invoke() {own:.2f} ms, invoke() off {m['invoke_off'][0]:.2f} ms")
        total = m["bwrap"][0] + own
        print(f"invoke(), all of it (bwrap only's processes + the runtime's): {total:.1f} ms against {base + parent:.1f} ms,"
              f" ratio {total / (base + parent):.2f}")
    else:
        line("plain subprocess spawn", "plain")
        line("invoke(), sandboxed", "invoke", f"   <- target {TARGET}")
        line("invoke(), METNOS_SANDBOX=0", "invoke_off")
        line("bwrap only", "bwrap")
    if fences:
        full, full_low = m["bwrap"][0], m["bwrap"][3]
        print("what each fence costs (bwrap only minus bwrap only without it; median, fastest):")
        for key in (k for k in fences if k != "floor"):
            sign = -1 if key in ADDED_FLAGS else 1
            label = f"{key} (added back)" if key in ADDED_FLAGS else key
            print(f"  {label:24s}{sign * (full - m[key][0]):+6.1f} ms {sign * (full_low - m[key][3]):+6.1f} ms")
        if "floor" in fences:
            print(f"  {'bwrap floor (bare, no namespace flags)':40s}{m['floor'][0] - base:+6.1f} ms over plain")
        if not cpu:
            print(f"  {'cgroup, plan and checks':40s}{m['invoke'][0] - full:+6.1f} ms (invoke() minus bwrap only)")
    if not cpu:
        ratio = m["invoke"][0] / base
        print(f"spawn ratio {ratio:.2f}: {'within' if ratio <= TARGET else 'ABOVE'} the {TARGET}x target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
