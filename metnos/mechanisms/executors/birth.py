"""The birth-test runner.

Birth tests (``tests/birth.py`` in each executor) are functions
``birth_<what>(run, tmp)``: ``run(args, **ctx_overrides) -> dict`` calls the
executor's ``run(args, ctx)``, ``tmp`` is a scratch ``pathlib.Path`` that is
also the executor's home and workspace for that test; a failing assert (any
exception) fails the birth. They run in a child process through ``spawn``,
so a crashing executor cannot take the loader down. Here the default is a
plain ``python -I -S`` (no site-packages, as in the sandbox); the loader
passes metnos.mechanisms.invocation.birth's spawn, which runs them in the sandbox.

Every call a test makes is checked here, in the parent, against the
contract: args against the input schema, the result against the output
schema. A birth that passes its asserts but breaks its own contract fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from metnos.mechanisms.executors.context import ExecutorCtx
from metnos.mechanisms.executors.schemas import ContractSchemas, validator
from metnos.mechanisms.sandbox.profile import SandboxProfile

HOST_SCRIPT = Path(__file__).with_name("birth_host.py")


@dataclass(frozen=True)
class SpawnRequest:
    """What a spawner needs: the command, its stdin, and what to grant."""

    argv: list[str]
    stdin: bytes
    executor_dir: Path
    tmp_dir: Path
    host_script: Path
    profile: SandboxProfile | None
    timeout_s: float


@dataclass(frozen=True)
class SpawnResult:
    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False


Spawn = Callable[[SpawnRequest], SpawnResult]


def spawn_subprocess(req: SpawnRequest) -> SpawnResult:
    """Plain child process, no sandbox: the fallback when there is none."""
    try:
        p = subprocess.run(req.argv, input=req.stdin, capture_output=True, timeout=req.timeout_s,
                           cwd=req.tmp_dir)
    except subprocess.TimeoutExpired as exc:
        return SpawnResult(-9, exc.stdout or b"", exc.stderr or b"", timed_out=True)
    return SpawnResult(p.returncode, p.stdout, p.stderr)


def tests_digest(executor_dir: Path) -> str:
    """blake3 over the executor's ``tests/`` folder, names and bytes in order:
    which birth tests ran, whether or not the signature covers them."""
    h = blake3.blake3()
    tests = Path(executor_dir) / "tests"
    for path in sorted(p for p in tests.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(tests)).encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class BirthCase:
    name: str
    ok: bool
    error: str | None
    calls: int


@dataclass
class BirthResult:
    cases: list[BirthCase] = field(default_factory=list)
    # Set when the whole run failed (import error, crash, timeout, contract).
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None and bool(self.cases) and all(c.ok for c in self.cases)

    @property
    def failure(self) -> str | None:
        if self.reason:
            return self.reason
        bad = next((c for c in self.cases if not c.ok), None)
        return f"{bad.name}: {bad.error}" if bad else None


def _contract_problem(schemas: ContractSchemas, calls: list[dict[str, Any]]) -> str | None:
    vin, vout = validator(schemas.input), validator(schemas.output)
    for i, call in enumerate(calls, 1):
        err = next(iter(vin.iter_errors(call["args"])), None)
        if err is not None:
            return f"call {i}: args break the input schema: {err.message}"
        err = next(iter(vout.iter_errors(call["result"])), None)
        if err is not None:
            where = "/".join(str(p) for p in err.absolute_path) or "<root>"
            return f"call {i}: result breaks the output schema at {where}: {err.message}"
    return None


def run_birth_tests(
    executor_dir: Path | str,
    ctx: ExecutorCtx | dict[str, Any],
    *,
    schemas: ContractSchemas | None = None,
    profile: SandboxProfile | None = None,
    spawn: Spawn | None = None,
    timeout_s: float = 30.0,
    python: str = sys.executable,
) -> BirthResult:
    executor_dir = Path(executor_dir).absolute()
    tmp = Path(tempfile.mkdtemp(prefix="metnos-birth-"))
    try:
        request = json.dumps({"executor_dir": str(executor_dir), "tmp": str(tmp), "ctx": ctx}).encode()
        req = SpawnRequest(
            # -S as in the sandbox, unless the executor declared it needs packages.
            argv=[python, "-I", "-B", *([] if profile is not None and profile.site_packages else ["-S"]),
                  str(HOST_SCRIPT)], stdin=request, executor_dir=executor_dir,
            tmp_dir=tmp, host_script=HOST_SCRIPT, profile=profile, timeout_s=timeout_s,
        )
        res = (spawn or spawn_subprocess)(req)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if res.timed_out:
        return BirthResult(reason=f"birth tests did not finish within {timeout_s:g} s")
    try:
        report = json.loads(res.stdout)
    except ValueError:
        tail = res.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return BirthResult(reason=f"birth host crashed (exit {res.returncode}): {tail[0]}")
    if report.get("fatal"):
        return BirthResult(reason=report["fatal"])
    result = BirthResult(cases=[
        BirthCase(t["name"], t["ok"], t["error"], len(t["calls"])) for t in report["tests"]
    ])
    if schemas is not None:
        for t in report["tests"]:
            problem = _contract_problem(schemas, t["calls"])
            if problem:
                result.reason = f"{t['name']}: {problem}"
                break
    return result
