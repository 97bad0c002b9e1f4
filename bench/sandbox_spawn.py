"""Spawn cost of a sandboxed invocation against a plain subprocess spawn.

    python bench/sandbox_spawn.py [--runs N]

The baseline is what the same work costs with no fence at all: the same
interpreter runs the same invocation host (host.py) and the same executor,
fed the same request through a pipe, with ``subprocess.run`` - no bwrap, no
seccomp, no Landlock, no cgroup, no caps. Against it:

  invoke()      the whole sandboxed invocation as the runtime makes it:
                schema and policy checks, the invocation cgroup (pids and
                memory caps), bwrap with its uid, seccomp and Landlock,
                the drain under the caps, the clean-up;      <- the figure
  invoke() off  the same with METNOS_SANDBOX=0: the runtime's own part
                (checks, cgroup, caps), without bubblewrap;
  bwrap only    the host command wrapped in bwrap (seccomp fd, Landlock
                inside) run with subprocess.run: bubblewrap's own part.

The variants are sampled in turn (one of each, N times) so that a change in
the machine's load touches them all alike; each figure is the median.
Target: invoke() at most 1.3 times the plain spawn.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from metnos.invocation.runner import host_config, invoke
from metnos.sandbox.bwrap import plan_for, probe, python_runtime, wrap_plan
from metnos.sandbox.profile import SandboxProfile
from metnos.sandbox.status import status
from metnos.workspace import Workspace

MAIN = "def run(args, ctx):\n    return {'echo': args.get('x')}\n"
TARGET = 1.3


def interleaved_medians(variants: dict[str, Callable[[], None]], runs: int) -> dict[str, float]:
    for fn in variants.values():
        fn()  # warm caches (probe, BPF, page cache)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, fn in variants.items():
            t = time.perf_counter()
            fn()
            samples[name].append((time.perf_counter() - t) * 1000)
    return {name: statistics.median(s) for name, s in samples.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=25)
    n = ap.parse_args().runs
    if not probe().works:
        print(f"bwrap cannot run here ({probe().error}); nothing to compare")
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
        request = b'{"args": {"x": 1}, "ctx": {}}'
        plain_plan = plan_for(code, profile, workspace=ws, env=off)
        plain_cmd = [exe, "-I", "-S", plain_plan.host_path, host_config(plain_plan, profile)]
        boxed_plan = plan_for(code, profile, workspace=ws, env=on)
        boxed_cmd = [exe, "-I", "-S", boxed_plan.host_path, host_config(boxed_plan, profile)]

        def plain() -> None:
            r = subprocess.run(plain_cmd, input=request, capture_output=True, env=plain_plan.child_env)
            assert r.returncode == 0, r.stderr

        def inv(env: dict[str, str]) -> Callable[[], None]:
            def go() -> None:
                out = invoke(code, profile, {"x": 1}, workspace=ws, env=env)
                assert out.ok, out
            return go

        def bwrap_only() -> None:
            w = wrap_plan(boxed_plan, boxed_cmd)
            try:
                r = subprocess.run(w.argv, input=request, capture_output=True, env=w.env, pass_fds=w.pass_fds)
            finally:
                w.close()
            assert r.returncode == 0, r.stderr

        layers = invoke(code, profile, {"x": 1}, workspace=ws, env=on).layers
        m = interleaved_medians({"plain": plain, "invoke": inv(on), "invoke_off": inv(off), "bwrap": bwrap_only}, n)

    st = status()
    base = m["plain"]
    print(f"runs per figure: {n} (median, sampled in turn); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"layers of the sandboxed invocation: {', '.join(layers)} (memory cap: {st.memory_cap})")
    print(f"plain subprocess spawn      {base:6.1f} ms   1.00")
    print(f"invoke(), sandboxed         {m['invoke']:6.1f} ms   {m['invoke'] / base:.2f}   <- target {TARGET}")
    print(f"invoke(), METNOS_SANDBOX=0  {m['invoke_off']:6.1f} ms   {m['invoke_off'] / base:.2f}")
    print(f"bwrap only                  {m['bwrap']:6.1f} ms   {m['bwrap'] / base:.2f}")
    ratio = m["invoke"] / base
    print(f"spawn ratio {ratio:.2f}: {'within' if ratio <= TARGET else 'ABOVE'} the {TARGET}x target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
