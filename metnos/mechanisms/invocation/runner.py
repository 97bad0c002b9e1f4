"""invoke(): policy, schema, spawn in the sandbox, caps, result.

The order is the one of seeds/000 ch. 9: arguments against schema.json, the
policy check, then the spawn; the result is parsed and checked against the
schema after it. Every way this can go wrong ends as an InvocationOutcome
with a FailureKind, never as an exception. Recording the outcome as events is
the caller's job.
"""

from __future__ import annotations

import copy
import json
import math
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import blake3
import orjson

from metnos.mechanisms.invocation import frame
from metnos.mechanisms.failures import FailureKind, InvocationError, SandboxUnavailable, SchemaViolation
from metnos.mechanisms.invocation.outcome import InvocationOutcome
from metnos.mechanisms.invocation.pump import run_contained
from metnos.mechanisms.invocation.schema import validate
from metnos.mechanisms.sandbox import netallow
from metnos.mechanisms.sandbox.bwrap import SandboxPlan, plan_for, python_runtime, require_sandbox, wrap_plan
from metnos.mechanisms.sandbox.egress import Connection, EgressProxy
from metnos.mechanisms.sandbox.policy import NOT_ALLOWED, Scope, check_args
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.settings.loader import env_section
from metnos.settings.workspace import Workspace

_HOST_ERROR = b"METNOS-HOST-ERROR "
# The sandbox_mode of an invocation refused because nothing may run.
UNAVAILABLE = "unavailable"
_NOFILE = 256
_MB = 1024 * 1024


def _ms(t0: float) -> int:
    return int((time.monotonic() - t0) * 1000)


def _fail(kind: FailureKind, t0: float, error: dict, *, plan: SandboxPlan | None = None, **kw: Any) -> InvocationOutcome:
    return InvocationOutcome(
        ok=False, kind=kind.value, output=kw.pop("output", None), exit_code=kw.pop("exit_code", None),
        duration_ms=_ms(t0), stderr_tail=kw.pop("stderr_tail", ""), output_sha=kw.pop("output_sha", None),
        output_bytes=kw.pop("output_bytes", 0), error=error,
        layers=kw.pop("layers", plan.layers if plan else ()),
        sandbox_mode=kw.pop("sandbox_mode", plan.mode if plan else ""),
        network=kw.pop("network", ()),
    )


def host_config(plan: SandboxPlan, profile: SandboxProfile, *, proxy_fd: int | None = None) -> str:
    """host.py's CONFIG argument: where the code is, the limits, the Landlock
    rules, and the inherited socket that leads to the egress proxy."""
    cpu = profile.max_cpu_s or profile.max_duration_s
    cfg: dict[str, Any] = {
        "code_dir": plan.code_dir,
        # bwrap's --die-with-parent covers a sandbox; without one the host
        # sees to it itself.
        "die_with_parent": not plan.active,
        "site_packages": plan.site_packages,
        "limits": {
            "memory_bytes": profile.max_memory_mb * _MB,
            "cpu_s": max(1, math.ceil(cpu)),
            "nofile": _NOFILE,
            "nproc": profile.max_pids,
        },
    }
    if plan.active and plan.landlock_path:
        cfg["landlock"] = {"rules": plan.landlock_rules, "tcp_ports": plan.tcp_ports}
    if proxy_fd is not None:
        cfg["proxy"] = {"fd": proxy_fd}
    return json.dumps(cfg, separators=(",", ":"))


def _admission(scope: Scope) -> Callable[[str, int], tuple[bool, str]]:
    def admit(host: str, port: int) -> tuple[bool, str]:
        if not netallow.declared(host, port, scope.hosts):
            return False, "not among the hosts the executor's manifest declares"
        if not netallow.allowed(host, port, scope.allow):
            return False, NOT_ALLOWED
        return True, ""

    return admit


def _network_denied(denied: list[Connection]) -> dict[str, Any]:
    first = denied[0]
    return {"rule": "not-allowed", "host": first.host, "port": first.port, "detail": first.reason,
            "message": f"the egress proxy refused {len(denied)} connection(s); first: {first.host}:{first.port}: {first.reason}"}



def _host_error(stderr: bytes) -> dict[str, Any]:
    i = stderr.rfind(_HOST_ERROR)
    if i < 0:
        return {}
    line = stderr[i + len(_HOST_ERROR):].split(b"\n", 1)[0]
    try:
        d = json.loads(line)
        return {"type": str(d.get("type")), "message": str(d.get("message"))}
    except ValueError:
        return {}


def _with_resolved_paths(args: Mapping[str, Any], checked: Mapping[str, Any]) -> Any:
    """The executor gets the paths the policy approved (``~`` expanded,
    symlinks resolved), so it cannot read a different file than was checked."""
    out = copy.deepcopy(dict(args))
    for pointer, value in checked.items():
        if not isinstance(value, Path):
            continue
        keys = [k.replace("~1", "/").replace("~0", "~") for k in pointer[1:].split("/")]
        node = out
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = str(value)
        else:
            node[last] = str(value)
    return out


def _exit_message(code: int, stderr_tail: str, sandboxed: bool) -> str:
    """Why the process ended, in words: its last stderr line names the cause
    (a bwrap that could not build the sandbox, a Python traceback's last line)."""
    last = next((ln.strip() for ln in reversed(stderr_tail.splitlines()) if ln.strip()), "")
    if sandboxed and last.startswith("bwrap:"):
        return f"the sandbox could not start: {last[:300]}"
    return f"exit code {code}: {last[:300]}" if last else f"exit code {code}"


def _signal_of(code: int, sandboxed: bool) -> int | None:
    if code < 0:
        return -code
    if sandboxed and code > 128:
        return code - 128  # bwrap reports a signalled child as 128 + signo
    return None


def invoke(
    code_dir: Path | str,
    profile: SandboxProfile,
    args: Mapping[str, Any],
    input_schema: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
    *,
    workspace: Workspace | None = None,
    ctx: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> InvocationOutcome:
    t0 = time.monotonic()
    env = dict(os.environ if env is None else env)
    workspace = workspace or Workspace.from_config(env_section("workspace", env))
    plan: SandboxPlan | None = None
    try:
        # First: where nothing may run, no other answer matters.
        require_sandbox(env)
    except SandboxUnavailable as e:
        return _fail(e.kind, t0, e.details(), layers=(), sandbox_mode=UNAVAILABLE)
    try:
        validate(args, input_schema, where="input")
        plan = plan_for(Path(code_dir), profile, workspace=workspace, env=env)
        checked = check_args(args, input_schema, plan.scope)
        request = orjson.dumps({"args": _with_resolved_paths(args, checked), "ctx": dict(ctx or {})})
    except InvocationError as e:
        return _fail(e.kind, t0, e.details(), plan=plan, layers=("policy",))
    except TypeError as e:  # args or ctx not JSON-serialisable
        return _fail(FailureKind.SCHEMA_VIOLATION, t0, {"where": "input", "path": "/", "message": str(e)}, plan=plan)

    exe, _, _ = python_runtime()
    proxy = EgressProxy(_admission(plan.scope)).start() if plan.egress else None
    try:
        proxy_fd = proxy.take_child_fd() if proxy else None
        cmd = [exe, "-I", "-S", "-B", plan.host_path, host_config(plan, profile, proxy_fd=proxy_fd)]
        wrapped = wrap_plan(plan, cmd)
        if proxy_fd is not None:
            wrapped.pass_fds += (proxy_fd,)
        c = run_contained(wrapped, request, max_stdout=profile.max_output_bytes + frame.HEADER_MAX,
                          deadline=t0 + profile.max_duration_s, max_pids=profile.max_pids,
                          max_memory_bytes=profile.max_memory_mb * _MB, complete=frame.whole)
    finally:
        connections = proxy.connections if proxy else []
        if proxy:
            proxy.close()
    network = tuple(x.to_record() for x in connections)
    layers = list(plan.layers) + c.layers
    if c.spawn_error is not None:
        return _fail(FailureKind.CRASH, t0, {"type": "SpawnFailed", "message": c.spawn_error}, plan=plan, layers=tuple(layers))
    assert c.returncode is not None
    code = c.returncode
    tail = c.stderr_tail.decode("utf-8", "replace")
    result = frame.unframe(c.stdout)
    received = c.stdout if result is None else result
    too_large = c.too_large or len(received) > profile.max_output_bytes
    data = received[:profile.max_output_bytes]  # of a result over the cap, the cap's worth is kept
    sha = blake3.blake3(data).hexdigest() if data else None
    common = dict(plan=plan, exit_code=code, stderr_tail=tail, output_sha=sha, output_bytes=len(data),
                  layers=tuple(layers), network=network)
    if c.memory_exceeded:
        # Before the rest: a tree killed for memory may also look timed out
        # or crashed, but this is why it ended.
        return _fail(FailureKind.MEMORY_EXCEEDED, t0, {
            "limit_mb": profile.max_memory_mb, "enforced_by": c.memory_cap,
            "peak_mb": None if c.memory_peak is None else round(c.memory_peak / _MB, 1),
        }, **common)
    if c.timed_out:
        return _fail(FailureKind.TIMEOUT, t0, {"clock": "wall", "limit_s": profile.max_duration_s}, **common)
    if too_large:
        return _fail(FailureKind.TOO_LARGE, t0, {"limit_bytes": profile.max_output_bytes}, **common)
    denied = [x for x in connections if not x.allowed]
    if denied:
        # Whatever the executor made of the refusal, the call tried to leave its scope.
        return _fail(FailureKind.NETWORK_DENIED, t0, _network_denied(denied), **common)
    sig = _signal_of(code, plan.active)
    if sig == signal.SIGXCPU:
        return _fail(FailureKind.TIMEOUT, t0, {"clock": "cpu", "limit_s": profile.max_cpu_s or profile.max_duration_s}, **common)
    if code != 0:
        err = _host_error(c.stderr_tail) or {"type": "Exited", "message": _exit_message(code, tail, plan.active)}
        if sig is not None:
            err["signal"] = signal.Signals(sig).name if sig in signal.valid_signals() else sig
        return _fail(FailureKind.CRASH, t0, err, **common)
    if result is None:
        return _fail(FailureKind.NON_JSON_OUTPUT, t0, {"message": "the result channel holds no whole result frame"},
                     **common)
    try:
        output = orjson.loads(result)
    except orjson.JSONDecodeError as e:
        return _fail(FailureKind.NON_JSON_OUTPUT, t0, {"message": str(e)}, **common)
    if not isinstance(output, dict):
        return _fail(FailureKind.NON_JSON_OUTPUT, t0, {"message": "result is not a JSON object"}, **common)
    try:
        validate(output, output_schema, where="output")
    except SchemaViolation as e:
        return _fail(e.kind, t0, e.details(), **common)
    return InvocationOutcome(
        ok=True, kind=None, output=output, exit_code=code, duration_ms=_ms(t0), stderr_tail=tail,
        output_sha=sha, output_bytes=len(data), error={}, layers=tuple(layers), sandbox_mode=plan.mode,
        network=network,
    )
