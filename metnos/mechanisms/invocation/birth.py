"""Birth tests inside the sandbox: the loader's default spawn.

A birth test runs in one process with the executor it tests, so it gets the
executor's own profile, with the layers and caps of an invocation (bwrap
namespaces and ``--cap-drop ALL``, seccomp, Landlock applied by the host
itself, the rlimits, a pids cgroup, a wall clock that kills the process
group, a capped stdout). What differs is the world it runs against:

* the test's scratch dir is the user's home and ``$WORKSPACE``: ``~`` and
  ``$WORKSPACE`` hints expand into it, nothing of the real home is shown,
  and the real home's secrets are masked even under an absolute grant;
* the scratch dir is always writable, because the test code writes its
  fixtures there before it calls the executor;
* the network is a private loopback: a network executor's test serves its
  own pages on 127.0.0.1 (any port), and nothing outside can be reached,
  which keeps births hermetic;
* no environment variable of the profile is passed on: a birth never sees
  the user's real tokens.

With METNOS_SANDBOX=off it is a plain child process; where bwrap cannot
start, the spawn raises SandboxUnavailable: no birth test runs unsandboxed
by accident, and none fails (and quarantines) for the machine's fault.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from metnos.mechanisms.failures import PolicyViolation
from metnos.mechanisms.invocation.pump import run_contained
from metnos.mechanisms.invocation.runner import host_config
from metnos.mechanisms.sandbox.bwrap import INSIDE_DIR, SandboxPlan, plan_for, python_runtime, require_sandbox, wrap_plan
from metnos.mechanisms.sandbox.forbidden import user_forbidden
from metnos.mechanisms.sandbox.hints import home_of
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.settings.loader import env_section
from metnos.settings.workspace import Workspace
from metnos.mechanisms.executors.birth import SpawnResult, spawn_subprocess
from metnos.mechanisms.executors.birth import run_birth_tests
from metnos.mechanisms.executors.context import build_ctx
from metnos.mechanisms.executors.manifest import load_manifest
from metnos.mechanisms.executors.schemas import check_contract_schemas

if TYPE_CHECKING:
    from metnos.mechanisms.executors.birth import Spawn, SpawnRequest, SpawnResult

BIRTH_HOST = "birth_host.py"
# The report carries every call's args and result, so it may exceed what a
# single call may return; still bounded.
_MIN_REPORT_BYTES = 16 * 1024 * 1024
_MAX_REPORT_BYTES = 256 * 1024 * 1024


def birth_world(scratch: Path, env: Mapping[str, str], real: Workspace | None = None) -> tuple[Workspace, dict[str, str]]:
    """The workspace and environment a birth test plans against.

    The scratch dir is the home and ``$WORKSPACE``; Metnos's own folders are
    laid out in it as they are in the user's real layout (the config dir at
    the same place relative to the home, the log and keys inside) and created,
    so the birth's sandbox masks the same nesting an invocation's does: a
    layout the sandbox cannot build fails the birth, not every later call.
    """
    config = scratch / ".config" / "metnos"
    if real is not None:
        real_home = Path(os.path.realpath(home_of(env)))
        real_config = Path(os.path.realpath(real.config_dir))
        if real_config.is_relative_to(real_home) and real_config != real_home:
            config = scratch / real_config.relative_to(real_home)
    ws = Workspace(data_dir=scratch, config_dir=config)
    for d in (*ws.forbidden_paths(), ws.executors_dir, ws.blobs_dir, ws.runtime_dir):
        d.mkdir(parents=True, exist_ok=True)
    world_env = {"HOME": str(scratch)}
    if "TZ" in env:
        world_env["TZ"] = env["TZ"]
    return ws, world_env


def birth_plan(req: SpawnRequest, *, workspace: Workspace, env: Mapping[str, str]) -> tuple[SandboxPlan, SandboxProfile]:
    """The plan for one birth run, and the profile it was made from.

    ``workspace``/``env`` are the real ones: only their secrets are used,
    to mask them. Raises PolicyViolation as plan_for does.
    """
    scratch = Path(os.path.realpath(req.tmp_dir))
    profile = req.profile or SandboxProfile()
    # CPU for the whole test file, not for one call.
    profile = profile.model_copy(update={
        "fs_write": (*profile.fs_write, str(scratch)),
        "max_cpu_s": max(req.timeout_s, profile.max_cpu_s or 0),
    })
    world, world_env = birth_world(scratch, env, workspace)
    plan = plan_for(req.executor_dir, profile, workspace=world, env=world_env,
                    also_forbid=user_forbidden(workspace, env), private_network=True,
                    extra_files={BIRTH_HOST: req.host_script})
    return plan, profile


def _report_cap(profile: SandboxProfile) -> int:
    return min(_MAX_REPORT_BYTES, max(_MIN_REPORT_BYTES, 4 * profile.max_output_bytes))


def _spawn(req: SpawnRequest, workspace: Workspace | None, env: Mapping[str, str] | None) -> SpawnResult:

    env = dict(os.environ if env is None else env)
    if require_sandbox(env) == "off":
        return spawn_subprocess(req)
    t0 = time.monotonic()
    try:
        plan, profile = birth_plan(req, workspace=workspace or Workspace.from_config(env_section("workspace", env)), env=env)
    except PolicyViolation as e:
        return SpawnResult(2, b"", f"the sandbox refuses the profile: {e}".encode())
    cfg = json.loads(host_config(plan, profile))
    cfg["host_dir"] = INSIDE_DIR
    exe, _, _ = python_runtime()
    cmd = [exe, "-I", "-S", "-B", f"{INSIDE_DIR}/{BIRTH_HOST}", json.dumps(cfg, separators=(",", ":"))]
    cap = _report_cap(profile)
    c = run_contained(wrap_plan(plan, cmd), req.stdin, max_stdout=cap, deadline=t0 + req.timeout_s,
                      max_pids=profile.max_pids, max_memory_bytes=profile.max_memory_mb * 1024 * 1024)
    if c.spawn_error is not None:
        return SpawnResult(-1, b"", f"could not start the sandbox: {c.spawn_error}".encode())
    code = -9 if c.returncode is None else c.returncode
    if c.memory_exceeded:
        return SpawnResult(code or -9, b"", c.stderr_tail + (
            f"\nbirth tests exceeded the memory cap of {profile.max_memory_mb} MB "
            f"(held by {c.memory_cap})").encode())
    if c.timed_out:
        return SpawnResult(code, c.stdout, c.stderr_tail, timed_out=True)
    if c.too_large:
        # An unparseable report fails the birth; the last line says why.
        return SpawnResult(code, b"", c.stderr_tail + f"\nbirth report larger than {cap} bytes".encode())
    return SpawnResult(code, c.stdout, c.stderr_tail)


def sandboxed_spawn(req: SpawnRequest) -> SpawnResult:
    """Run a birth in the sandbox, hiding the secrets of the workspace the
    environment names (``METNOS_HOME`` or the XDG dirs) and of ``$HOME``."""
    return _spawn(req, None, None)


def make_sandboxed_spawn(workspace: Workspace | None = None, env: Mapping[str, str] | None = None) -> Spawn:
    """A spawn for ``load_executors`` that hides ``workspace``'s secrets
    (and, with ``env``, decides on that environment instead of os.environ).
    Where bwrap cannot start, SandboxUnavailable now, before any birth is tried."""
    require_sandbox(env)

    def spawn(req: SpawnRequest) -> SpawnResult:
        return _spawn(req, workspace, env)

    return spawn


def birth_of_folder(folder: Path, workspace: Workspace, *, now: str, config: Mapping | None = None,
                    spawn: Spawn | None = None):  # noqa: ANN201 - a BirthResult
    """The birth tests of an unsigned executor folder (a draft, a translation), in the sandbox
    under the profile its manifest gives; where bwrap cannot start, SandboxUnavailable."""

    manifest = load_manifest(folder / "manifest.toml")
    profile = manifest.sandbox_profile()
    schemas = check_contract_schemas((folder / "schema.json").read_bytes(), manifest.contract.input_schema,
                                     manifest.contract.output_schema)
    ctx = build_ctx(now=now, workspace=workspace, profile=profile, name=manifest.name,
                    version=manifest.version, config=config)
    if spawn is None:
        require_sandbox()
        spawn = make_sandboxed_spawn(workspace)
    return run_birth_tests(folder, ctx, schemas=schemas, profile=profile, spawn=spawn,
                           timeout_s=10.0 + 4 * profile.max_duration_s)
