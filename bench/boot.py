"""How long a CLI command spends booting, with and without reusing birth results.

    python bench/boot.py [--rounds 5]

Makes a fresh workspace (``metnos init``: the 13 seeds, signed), then times,
in interleaved rounds so that the machine's load falls on both alike:

  old    ``Runtime.boot`` running every birth test in the sandbox, as each
         command did before (``reuse_births=False``);
  new    ``Runtime.boot`` as a command boots now: births passed under the
         same conditions are taken from the log, signatures and digests are
         still checked;

and the same two as whole processes: ``metnos executors list`` with
``METNOS_BIRTH_REUSE=0`` (old) and without (new). Prints medians and the
ratio old/new.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def in_process(reuse: bool) -> float:
    from metnos.runtime.booted import Runtime
    from metnos.settings.workspace import Workspace

    started = time.perf_counter()
    with Runtime.boot(Workspace.from_env(), reuse_births=reuse) as rt:
        assert len(rt.report.loaded) == 13 and not rt.report.quarantined, rt.report.quarantined
        assert (len(rt.report.births_reused) == 13) == reuse
    return time.perf_counter() - started


def whole_command(reuse: bool) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if not reuse:
        env["METNOS_BIRTH_REUSE"] = "0"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "metnos", "executors", "list"], env=env, check=True,
                   stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="metnos-bench-boot-"))
    os.environ["METNOS_HOME"] = str(home)
    os.environ.pop("METNOS_BIRTH_REUSE", None)
    try:
        from metnos.adapters.cli import main as cli

        with open(os.devnull, "w") as devnull:
            saved, sys.stdout = sys.stdout, devnull
            try:
                assert cli(["init"]) == 0
            finally:
                sys.stdout = saved
        times: dict[str, list[float]] = {"boot old": [], "boot new": [], "command old": [], "command new": []}
        for _ in range(args.rounds):
            times["boot old"].append(in_process(reuse=False))
            times["boot new"].append(in_process(reuse=True))
            times["command old"].append(whole_command(reuse=False))
            times["command new"].append(whole_command(reuse=True))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, {args.rounds} interleaved rounds, medians:")
        for what in ("boot", "command"):
            old, new = med[f"{what} old"], med[f"{what} new"]
            spread = f"new {min(times[f'{what} new']) * 1000:.0f}-{max(times[f'{what} new']) * 1000:.0f} ms"
            label = "Runtime.boot" if what == "boot" else "metnos executors list"
            print(f"  {label:<24} old (every birth run) {old * 1000:7.0f} ms   new (births reused) {new * 1000:7.0f} ms"
                  f"   ratio {old / new:5.1f}x   ({spread})")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
