"""The boot-time loader: which executors may run, and which are quarantined.

Layout under ``Workspace.executors_dir``::

    <origin>/<name>/<version>/{manifest.toml, main.py, schema.json, ...}
    <origin>/<name>/CURRENT        # the default version, e.g. "1.0.0"

with origin one of seed, synt, skill, mcp. Every version is verified on its own
(signature, digests, profile lock, manifest, schemas, then birth tests) and
either loaded or quarantined with the exact file and check that failed. A
synthesised or imported executor that takes a seed's name is refused
outright: it can never shadow a seed (nor can a skill shadow a synt).

The loader only returns verdicts; turning them into lifecycle events is the
caller's business.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nacl.signing import VerifyKey

from metnos.mechanisms.executors.birth import Spawn, run_birth_tests, tests_digest
from metnos.mechanisms.executors.context import build_ctx
from metnos.mechanisms.executors.manifest import ORIGINS, Manifest
from metnos.mechanisms.executors.mcp_pin import MCP_ORIGIN, MCP_PIN_CHECK, SERVER_FILE, pin_problem
from metnos.mechanisms.executors.schemas import ContractSchemas, SchemaCheckCache
from metnos.mechanisms.executors.signing import BIRTH, MANIFEST, verify_executor
from metnos.mechanisms.sandbox.profile import SandboxProfile
from metnos.settings.workspace import Workspace
from executors import SEED_DIR

CURRENT = "CURRENT"


@dataclass(frozen=True)
class LoadedExecutor:
    name: str
    version: str
    origin: str
    dir: Path
    manifest: Manifest
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    profile: SandboxProfile
    # blake3 over the signed bytes: "which exact executor ran".
    digest: str
    file_digests: dict[str, str]


@dataclass(frozen=True)
class Quarantined:
    origin: str
    name: str
    version: str
    dir: Path
    file: str
    check: str
    detail: str

    @property
    def reason(self) -> str:
        return f"{self.file}: {self.check} failed: {self.detail}" if self.detail else f"{self.file}: {self.check} failed"


@dataclass(frozen=True)
class NameIssue:
    """A problem with a name as a whole (its CURRENT), not with one version."""

    origin: str
    name: str
    file: str
    check: str
    detail: str

    @property
    def reason(self) -> str:
        return f"{self.file}: {self.check}: {self.detail}"


@dataclass
class LoadReport:
    loaded: list[LoadedExecutor] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)
    issues: list[NameIssue] = field(default_factory=list)
    # name -> the version CURRENT designates, only when it loaded cleanly.
    defaults: dict[str, LoadedExecutor] = field(default_factory=dict)
    # (name, version, why the first run failed) for births that passed on their second run.
    birth_retries: list[tuple[str, str, str]] = field(default_factory=list)
    # Births that ran and passed at this boot: (executor, blake3 of the tests that ran).
    births_passed: list[tuple[LoadedExecutor, str]] = field(default_factory=list)
    # Versions whose birth this boot took from an earlier pass instead of running it.
    births_reused: list[LoadedExecutor] = field(default_factory=list)

    def get(self, name: str, version: str | None = None) -> LoadedExecutor | None:
        if version is None:
            return self.defaults.get(name)
        return next((e for e in self.loaded if e.name == name and e.version == version), None)


def _subdirs(path: Path) -> list[Path]:
    # Dot-dirs (.archive, .tmp) are not executors.
    try:
        return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    except FileNotFoundError:
        return []


def shipped_seed_names() -> set[str]:

    return {p.name for p in _subdirs(SEED_DIR) if (p / MANIFEST).is_file()}


def _identity_problem(m: Manifest, origin: str, name: str, version: str) -> str | None:
    if m.name != name:
        return f"manifest names {m.name!r} but lives in folder {name!r}"
    if m.version != version:
        return f"manifest version {m.version} but lives in folder {version!r}"
    if m.origin != origin:
        return f"created_by {m.executor.created_by!r} but installed as {origin!r}"
    return None


def load_executors(
    workspace: Workspace,
    verify_key: VerifyKey,
    *,
    birth: bool = True,
    now: str | None = None,
    config: dict[str, Any] | None = None,
    spawn: Spawn | None = None,
    reserved_names: Iterable[str] | None = None,
    schema_cache: SchemaCheckCache | None = None,
    max_workers: int | None = None,
    born: Callable[[LoadedExecutor], bool] | None = None,
) -> LoadReport:
    """Verify every executor in the workspace and sort the sheep from the goats.

    ``reserved_names`` are names no synt/skill executor may take even when no
    seed of that name is installed; by default the shipped seeds' names.
    ``schema_cache`` defaults to a persistent one under the runtime dir.
    ``spawn`` runs the birth tests; by default in the sandbox
    (metnos.mechanisms.invocation.birth), a plain child process only with METNOS_SANDBOX=off.
    Where bwrap cannot start, that default raises SandboxUnavailable before
    any birth runs: the machine is at fault, not the executors, so none is
    quarantined for it. ``born`` says which verified versions already passed
    their birth under today's conditions (metnos.runtime.birth_reuse); those are
    loaded without running it again.
    """
    if schema_cache is None:
        schema_cache = SchemaCheckCache(workspace.runtime_dir / "schema-checks.txt")
    taken: dict[str, str] = {n: "seed" for n in (shipped_seed_names() if reserved_names is None else reserved_names)}
    report = LoadReport()
    candidates: list[LoadedExecutor] = []
    current_of: dict[tuple[str, str], str | None] = {}

    for origin in ORIGINS:
        names = _subdirs(workspace.executors_origin_dir(origin))
        for name_dir in names:
            name = name_dir.name
            versions = _subdirs(name_dir)
            owner = taken.get(name)
            if owner is not None and owner != origin:
                for vdir in versions:
                    report.quarantined.append(Quarantined(
                        origin, name, vdir.name, vdir, MANIFEST, "shadowing",
                        f"the name {name!r} belongs to a {owner} executor; a {origin} executor cannot take it"))
                continue
            for vdir in versions:
                q = _verify_one(report, origin, name, vdir, verify_key, schema_cache)
                if q is not None:
                    candidates.append(q)
            current_of[(origin, name)] = _read_current(name_dir)
        # Names are claimed per origin tier, after the whole tier is seen, so
        # that a seed claims its name even if every version of it is broken.
        for name_dir in names:
            taken.setdefault(name_dir.name, origin)
    schema_cache.save()

    if birth and born is not None:
        unborn = []
        for c in candidates:
            (report.births_reused if born(c) else unborn).append(c)
        report.loaded.extend(report.births_reused)
        candidates = unborn
    if birth:
        if spawn is None:
            msg = "birth tests need a spawn: metnos.mechanisms.invocation.birth.make_sandboxed_spawn(workspace)"
            raise ValueError(msg)
        _run_births(report, candidates, now=now, config=config, spawn=spawn,
                    workspace=workspace, max_workers=max_workers)
    else:
        report.loaded.extend(candidates)

    _resolve_defaults(report, current_of)
    return report


def _verify_one(report: LoadReport, origin: str, name: str, vdir: Path, verify_key: VerifyKey,
                cache: SchemaCheckCache) -> LoadedExecutor | None:
    v = verify_executor(vdir, verify_key, schema_cache=cache)
    if not v.ok:
        bad = v.failure
        report.quarantined.append(Quarantined(origin, name, vdir.name, vdir, bad.file, bad.check, bad.detail))
        return None
    assert v.manifest is not None and v.schemas is not None and v.digest is not None
    problem = _identity_problem(v.manifest, origin, name, vdir.name)
    if problem:
        report.quarantined.append(Quarantined(origin, name, vdir.name, vdir, MANIFEST, "identity", problem))
        return None
    if origin == MCP_ORIGIN:
        # The signature covers the folder, not the server it starts: that is pinned apart.
        changed = pin_problem(vdir)
        if changed:
            report.quarantined.append(Quarantined(origin, name, vdir.name, vdir, SERVER_FILE, MCP_PIN_CHECK, changed))
            return None
    return LoadedExecutor(
        name=name, version=vdir.name, origin=origin, dir=vdir, manifest=v.manifest,
        input_schema=v.schemas.input, output_schema=v.schemas.output,
        profile=v.manifest.sandbox_profile(), digest=v.digest, file_digests=dict(v.file_digests),
    )


def _read_current(name_dir: Path) -> str | None:
    try:
        return (name_dir / CURRENT).read_text().strip()
    except FileNotFoundError:
        return None


def _resolve_defaults(report: LoadReport, current_of: dict[tuple[str, str], str | None]) -> None:
    loaded = {(e.origin, e.name, e.version): e for e in report.loaded}
    bad = {(q.origin, q.name, q.version): q for q in report.quarantined}
    for (origin, name), current in current_of.items():
        if current is None:
            report.issues.append(NameIssue(origin, name, CURRENT, "present", "missing: no default version"))
        elif (origin, name, current) in loaded:
            report.defaults[name] = loaded[(origin, name, current)]
        elif (origin, name, current) in bad:
            report.issues.append(NameIssue(origin, name, CURRENT, "target",
                                           f"names {current!r}, which is quarantined"))
        else:
            # Compared with folder names only: CURRENT can never point outside.
            report.issues.append(NameIssue(origin, name, CURRENT, "target",
                                           f"names {current[:40]!r}, which is not installed"))


def _run_births(report: LoadReport, candidates: list[LoadedExecutor], *, now: str | None,
                config: dict[str, Any] | None, spawn: Spawn | None, workspace: Workspace,
                max_workers: int | None) -> None:
    now = now or datetime.now(timezone.utc).isoformat(timespec="seconds")

    def one(e: LoadedExecutor):
        # Read before the run: the digest names the tests that ran, not later ones.
        tests = tests_digest(e.dir)
        ctx = build_ctx(now=now, workspace=workspace, profile=e.profile, name=e.name,
                        version=e.version, config=config)
        schemas = ContractSchemas(document={}, input=e.input_schema, output=e.output_schema)
        timeout = 10.0 + 4 * e.profile.max_duration_s
        return run_birth_tests(e.dir, ctx, schemas=schemas, profile=e.profile, spawn=spawn, timeout_s=timeout), tests

    workers = max_workers or max(2, os.cpu_count() or 2)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, candidates))
    for e, (res, tests) in zip(candidates, results):
        if not res.ok:
            # Quarantine sticks until a person lifts it, so one failed run of
            # tests that ran alongside a dozen others (a slow machine, a spawn
            # that hiccuped) gets a second, alone; a real failure fails again.
            first = res.failure or "no birth test ran"
            res, tests = one(e)
            if res.ok:
                report.birth_retries.append((e.name, e.version, first))
        if res.ok:
            report.loaded.append(e)
            report.births_passed.append((e, tests))
        else:
            report.quarantined.append(Quarantined(e.origin, e.name, e.version, e.dir, BIRTH, "birth",
                                                  res.failure or "no birth test ran"))
