"""Spawn cost of an executor inside the full sandbox against a plain subprocess.

    python bench/sandbox_spawn.py [--runs N]

Two comparisons, median of N runs each:
  invoke()   the whole invocation path (schema, policy, cgroup, spawn, caps)
             with the sandbox on, against the same with METNOS_SANDBOX=0;
  spawn only the host command wrapped in bwrap (seccomp fd, Landlock applied
             inside) against the same host command run directly.
Target: ratio at most 1.5.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from metnos.invocation.runner import _host_config, invoke
from metnos.sandbox.bwrap import plan_for, probe, python_runtime, wrap_plan
from metnos.sandbox.profile import SandboxProfile
from metnos.workspace import Workspace

MAIN = "def run(args, ctx):\n    return {'echo': args.get('x')}\n"


def median_ms(fn, runs: int) -> float:
    fn()  # warm caches (probe, BPF, page cache)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


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
        base = {k: v for k, v in os.environ.items() if k != "METNOS_SANDBOX"}
        base["METNOS_HOME"] = str(Path(tmp) / "home")
        ws = Workspace.from_env(base)
        off = dict(base, METNOS_SANDBOX="0")
        profile = SandboxProfile()

        def inv(env):
            out = invoke(code, profile, {"x": 1}, workspace=ws, env=env)
            assert out.ok, out
        sandboxed = median_ms(lambda: inv(base), n)
        plain = median_ms(lambda: inv(off), n)

        exe, _, _ = python_runtime()
        request = b'{"args": {"x": 1}, "ctx": {}}'

        def spawn(env):
            plan = plan_for(code, profile, workspace=ws, env=env)
            w = wrap_plan(plan, [exe, "-I", "-S", plan.host_path, _host_config(plan, profile)])
            try:
                r = subprocess.run(w.argv, input=request, capture_output=True, env=w.env, pass_fds=w.pass_fds)
            finally:
                w.close()
            assert r.returncode == 0, r.stderr
        raw_sandboxed = median_ms(lambda: spawn(base), n)
        raw_plain = median_ms(lambda: spawn(off), n)

    print(f"runs per figure: {n} (median)")
    print(f"invoke():   sandboxed {sandboxed:6.1f} ms   plain {plain:6.1f} ms   ratio {sandboxed / plain:.2f}")
    print(f"spawn only: sandboxed {raw_sandboxed:6.1f} ms   plain {raw_plain:6.1f} ms   ratio {raw_sandboxed / raw_plain:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
