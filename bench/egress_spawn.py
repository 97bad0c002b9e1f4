"""What the egress proxy costs an invocation with a network grant.

    python bench/egress_spawn.py [--runs N]

Every figure is a sandboxed invoke() of the same one-file executor, sampled
in turn (one of each, N times), median:

  no grant      the executor has no network: the baseline;
  grant, idle   a network grant: the egress proxy is started on the host,
                the bridge in the sandbox, but no connection is made;
  grant, 1 GET  the same executor fetches one page from a server on
                127.0.0.1 through the proxy (urllib, as get_urls does);
  plain GET     the same fetch by the same host program with no sandbox at
                all (subprocess.run, direct connection): what the request
                alone costs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sandbox_spawn import interleaved_medians  # noqa: E402
from metnos.mechanisms.invocation.runner import host_config, invoke  # noqa: E402
from metnos.mechanisms.sandbox.bwrap import plan_for, probe, python_runtime  # noqa: E402
from metnos.mechanisms.sandbox.profile import SandboxProfile  # noqa: E402
from metnos.settings.workspace import Workspace  # noqa: E402
from tests.support.web_server import web_server  # noqa: E402

MAIN = """
import urllib.request
def run(args, ctx):
    if not args.get("url"):
        return {"echo": 1}
    return {"body": urllib.request.urlopen(args["url"], timeout=5).read().decode()}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    n = ap.parse_args().runs
    if not probe().works:
        print(f"bwrap cannot run here ({probe().error}); nothing to compare")
        return 1
    with tempfile.TemporaryDirectory() as tmp, web_server() as server:
        code = Path(tmp) / "fetch"
        code.mkdir()
        (code / "main.py").write_text(MAIN)
        env = {k: v for k, v in os.environ.items() if k != "METNOS_SANDBOX"}
        env["METNOS_HOME"] = str(Path(tmp) / "home")
        ws = Workspace.from_env(env)
        ws.config_dir.mkdir(parents=True)
        ws.config_file.write_text(f'[network]\nallow = ["{server.pattern}"]\n')
        none, granted = SandboxProfile(), SandboxProfile(network_hosts=("$NETWORK_ALLOW",))
        url = server.base + "/bench"

        def inv(profile: SandboxProfile, args: dict) -> Callable[[], None]:
            def go() -> None:
                out = invoke(code, profile, args, workspace=ws, env=env)
                assert out.ok, out
            return go

        off = dict(env, METNOS_SANDBOX="0")
        plan = plan_for(code, none, workspace=ws, env=off)
        exe, _, _ = python_runtime()
        plain_cmd = [exe, "-I", "-S", plan.host_path, host_config(plan, none)]
        request = ('{"args": {"url": "%s"}, "ctx": {}}' % url).encode()

        def plain_get() -> None:
            r = subprocess.run(plain_cmd, input=request, capture_output=True, env={**plan.child_env, "no_proxy": "*"})
            assert r.returncode == 0, r.stderr

        m = interleaved_medians({"none": inv(none, {}), "idle": inv(granted, {}), "get": inv(granted, {"url": url}),
                                 "plain": plain_get}, n)
    base = m["none"]
    print(f"runs per figure: {n} (median, sampled in turn); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"invoke(), no network grant      {base:6.1f} ms   1.00")
    print(f"invoke(), grant, no connection  {m['idle']:6.1f} ms   {m['idle'] / base:.2f}")
    print(f"invoke(), grant, one GET        {m['get']:6.1f} ms   {m['get'] / base:.2f}")
    print(f"plain subprocess, direct GET    {m['plain']:6.1f} ms   {m['plain'] / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
