"""Importing a skill: translate, check, test, sign, install, and hold in quarantine.

``import_skill`` turns an agentskills.io folder into executors under
``executors/skill/NAME/1.0.0/`` (metnos.runtime.skills.translate), with the
capabilities the user confirmed and no other. Before anything is written
there, every translation's code is checked (the checks of signing: no eval,
exec, compile, ``__import__``, importlib, no standard-library shadowing) and
its birth test runs in the sandbox; one failure and nothing is installed.
Each installed version is registered in the log as quarantined (check
``approval``): never invoked until ``approve`` lifts it, after which it is
checked at every boot and call like any executor. A file of it changed
afterwards (its script) breaks its signature, and the loader or the call
quarantines it again, naming the file.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventsourcing.application import AggregateNotFoundError

from domain.executor import Executor, LifecycleError, executor_id
from domain.errors import MetnosError
from metnos.mechanisms.executors.code_check import problems_in_source, shadowing_problems
from metnos.runtime.skills.skill_folder import Skill, read_skill
from metnos.runtime.skills.translate import VERSION, Translation, translate, write_translation
from metnos.runtime.taken_names import taken_names
from metnos.mechanisms.executors.manifest import ManifestError, load_manifest
from metnos.mechanisms.executors.install import install_executor
from metnos.mechanisms.executors.keys import load_signing_key
from metnos.mechanisms.executors.signing import SigningError
from metnos.mechanisms.invocation.birth import birth_of_folder
from metnos.mechanisms.executors.signing import verify_executor

APPROVAL = "approval"


class ImportRefused(MetnosError):
    """The skill cannot be imported: names the file and the check."""


@dataclass(frozen=True)
class Plan:
    skill: Skill
    translations: list[Translation]
    grants: dict[str, Any]


def plan_import(runtime: Any, path: Path, grants: Mapping[str, Any]) -> Plan:
    """Read and translate; nothing is written yet."""

    skill = read_skill(path)
    mine = {e["name"] for e in runtime.catalogue_state()["executors"].values()
            if e["origin"] == "skill" and e["versions"]}
    already = [t for t in mine if (runtime.workspace.executors_origin_dir("skill") / t / VERSION / "SKILL.md").is_file()
               and _skill_of(runtime, t) == skill.name]
    if already:
        raise ImportRefused(f"the skill {skill.name!r} is already imported as {', '.join(sorted(already))}")
    translations = translate(skill, grants, taken=taken_names(runtime.catalogue_state()),
                             created_at=runtime.clock().isoformat(timespec="seconds"))
    return Plan(skill, translations, dict(grants))


def _skill_of(runtime: Any, name: str) -> str | None:

    try:
        created_by = load_manifest(runtime.workspace.executors_origin_dir("skill") / name / VERSION / "manifest.toml").executor.created_by
    except ManifestError:
        return None
    return created_by.split(":", 1)[1]


def _code_problems(t: Translation) -> list[str]:
    problems = [str(p) for p in shadowing_problems(t.files)]
    for rel, data in sorted(t.files.items()):
        if rel.endswith(".py"):
            problems += [str(p) for p in problems_in_source(data, rel)]
    return problems


def install_plan(runtime: Any, plan: Plan, *, spawn: Any = None) -> list[Path]:
    """Check, test and install every translation, or none; each registered as quarantined."""

    staging = runtime.workspace.runtime_dir / "skills" / plan.skill.name
    shutil.rmtree(staging, ignore_errors=True)
    try:
        folders = []
        for t in plan.translations:
            problems = _code_problems(t)
            if problems:
                raise ImportRefused(f"{plan.skill.name}: {t.script} cannot become an executor: {problems[0]}")
            folder = write_translation(t, staging / t.name / VERSION)
            result = birth_of_folder(folder, runtime.workspace, now=runtime.clock().isoformat(),
                                     config=runtime.config, spawn=spawn)
            if not result.ok:
                raise ImportRefused(f"{plan.skill.name}: the birth test of {t.name} ({t.script}) failed: {result.failure}")
            folders.append(folder)
        key = load_signing_key(runtime.workspace)
        origin_dir = runtime.workspace.executors_origin_dir("skill")
        installed = []
        for folder in folders:
            try:
                installed.append(install_executor(folder, origin_dir, key))
            except SigningError as e:
                for done in installed:
                    shutil.rmtree(done.parent, ignore_errors=True)
                raise ImportRefused(f"{plan.skill.name}: signing refused it: {e}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _hold(runtime, plan, installed)
    return installed


def _hold(runtime: Any, plan: Plan, installed: list[Path]) -> None:
    """Registered, signed, and quarantined until the user approves: in one commit."""

    at = runtime.clock()
    held = []
    for folder in installed:
        check = verify_executor(folder, runtime.verify_key)
        name = folder.parent.name
        try:
            e = runtime.log.repository.get(executor_id("skill", name))
        except AggregateNotFoundError:
            e = Executor.register(name=name, origin="skill", at=at)
        digest = check.digest or "unverified"
        if e.state_of(VERSION) is None:
            e.register_version(version=VERSION, digest=digest, summary=f"imported from the skill {plan.skill.name}", at=at)
            e.record_signature(version=VERSION, digest=digest, key_id=runtime.key_id, at=at)
        grants = ", ".join(f"{k}={v}" for k, v in sorted(plan.grants.items())) or "none"
        e.quarantine(version=VERSION, check=APPROVAL, file=None, at=at,
                     reason=f"imported from the skill {plan.skill.name} with capabilities {grants}; "
                            f"waiting for `metnos skills approve {name}`")
        held.append(e)
    runtime.log.save(*held)
    runtime.refresh()


def approve(runtime: Any, name: str) -> str:
    """Lift the import quarantine after checking the files again; the next boot runs the birth."""

    entry = runtime.catalogue_state()["executors"].get(f"skill/{name}")
    if entry is None:
        raise MetnosError(f"there is no imported executor named {name!r}; see `metnos skills list`")
    version = entry["versions"].get(VERSION)
    if version is None or version["state"] != "quarantined":
        raise MetnosError(f"{name} {VERSION} is {version and version['state']}, not waiting for approval")
    check = verify_executor(runtime.workspace.executors_origin_dir("skill") / name / VERSION, runtime.verify_key)
    if not check.ok:
        bad = check.failure
        raise MetnosError(f"{name} {VERSION} fails {bad.file}: {bad.check}: {bad.detail}; it stays quarantined")
    e = runtime.log.repository.get(executor_id("skill", name))
    try:
        e.rehabilitate(version=VERSION, digest=check.digest, by="user", at=runtime.clock())
    except LifecycleError as err:
        raise MetnosError(str(err)) from None
    runtime.log.save(e)
    runtime.refresh()
    return check.digest or ""


def imported(runtime: Any) -> list[dict[str, Any]]:
    """Every imported executor, its skill, state and reason."""
    rows = []
    for entry in sorted(runtime.catalogue_state()["executors"].values(), key=lambda e: e["name"]):
        if entry["origin"] != "skill":
            continue
        for version, v in sorted(entry["versions"].items()):
            rows.append({"name": entry["name"], "version": version, "skill": _skill_of(runtime, entry["name"]),
                         "state": v["state"], "reason": v.get("reason"), "digest": v["digest"]})
    return rows
