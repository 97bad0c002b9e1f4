"""Executors: the catalogue, one executor's details, verify, sign, the lifecycle, and one-off runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from domain.executor import BELOW_THRESHOLD, Executor, LifecycleError, executor_id
from domain.errors import MetnosError
from metnos.mechanisms.executors.keys import KeyFileError, load_signing_key
from metnos.mechanisms.executors.signing import SigningError, sign_executor, verify_executor
from metnos.mechanisms.invocation.service import Call
from metnos.runtime.executor_texts import said, with_executors
from metnos.runtime.lifecycle import move_to_archive
from metnos.services import wiring
from metnos.services.queries import catalogue_rows
from metnos.settings import i18n
from metnos.settings.loader import in_force

# A seed's name is never shadowed, so the seed entry is the one meant.
_ORIGIN_ORDER = {"seed": 0, "synt": 1, "skill": 2}


def catalogue(language: str = i18n.SOURCE) -> list[dict[str, Any]]:
    """Every version of every executor (``metnos executors list``); the current one's summary in ``language`` when
    a fresh translation of it exists."""
    with wiring.boot() as rt:
        rows = catalogue_rows(rt.catalogue_state())
        if language != i18n.SOURCE:
            _say_summaries(rows, with_executors(i18n.load(rt.workspace.i18n_dir), rt.report.defaults), language)
        return rows


def _say_summaries(rows: list[dict[str, Any]], texts: i18n.Catalogue, language: str) -> None:
    """The current versions' summaries in ``language``, where a fresh translation exists."""
    for row in rows:
        if row["current"]:
            row["summary"] = said(texts, row["name"], "summary", language, row["summary"])


def detail(name: str, language: str = i18n.SOURCE) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """An executor's versions in the catalogue, and for each loaded one its folder, profile, contract and
    description (the current one's in ``language`` when a fresh translation of it exists)."""
    with wiring.boot() as rt:
        rows = [r for r in catalogue_rows(rt.catalogue_state()) if r["name"] == name]
        if not rows:
            msg = f"there is no executor named {name!r}; see `metnos executors list`"
            raise MetnosError(msg)
        texts = with_executors(i18n.load(rt.workspace.i18n_dir), rt.report.defaults)
        _say_summaries(rows, texts, language)
        current = rt.report.defaults.get(name)
        details = {
            e.version: {
                "description": (said(texts, name, "description", language, e.manifest.description[i18n.SOURCE])
                                if e is current else e.manifest.description[i18n.SOURCE]),
                "dir": str(e.dir),
                "profile": e.profile.model_dump(mode="json"),
                "profile_lock": e.profile.lock_digest(),
                "side_effects": e.manifest.contract.side_effects,
                "idempotent": e.manifest.contract.idempotent,
                "affinity": list(e.manifest.executor.affinity),
            }
            for e in rt.report.loaded if e.name == name
        }
    return rows, details


def verify(name: str | None) -> tuple[list[Any], list[Any]]:
    """Every check now, births included (no birth result from an earlier boot is taken): what passed and
    what is quarantined, of ``name`` or of all."""
    with wiring.boot(reuse_births=False) as rt:
        report = rt.report
        bad = [q for q in report.quarantined if not name or q.name == name]
        good = [e for e in report.loaded if not name or e.name == name]
    return good, bad


def sign(folder: Path) -> tuple[str, str]:
    """Write profile.lock and manifest.sig for an executor folder with the instance key: its digest and lock."""
    try:
        key = load_signing_key(in_force().workspace)
    except KeyFileError as e:
        raise MetnosError(f"{e}; run `metnos init` first") from None
    try:
        digest = sign_executor(folder, key)
    except SigningError as e:
        raise MetnosError(str(e)) from None
    return digest, (folder / "profile.lock").read_text().strip()


def change(action: str, name: str, version: str | None, *, reason: str = "") -> tuple[str, dict[str, Any], bool]:
    """promote, quarantine, rehabilitate or archive a version (the current one by default), recorded:
    the version, its state after, and whether it is the current one."""
    with wiring.boot() as rt:
        state = rt.catalogue_state()
        entries = [e for e in state["executors"].values() if e["name"] == name]
        if not entries:
            raise MetnosError(f"there is no executor named {name!r}; see `metnos executors list`")
        entry = sorted(entries, key=lambda e: _ORIGIN_ORDER.get(e["origin"], 3))[0]
        version = version or entry["current"]
        if version is None or version not in entry["versions"]:
            raise MetnosError(f"{name} has no version {version!r}; versions: {', '.join(sorted(entry['versions']))}")
        executor: Executor = rt.log.repository.get(executor_id(entry["origin"], entry["name"]))
        at = rt.clock()
        origin_dir = rt.workspace.executors_origin_dir(entry["origin"])
        name_dir = origin_dir / entry["name"]
        try:
            if action == "promote":
                if executor.state_of(version) == BELOW_THRESHOLD:
                    # Below threshold, promoting is the user's "keep it" (seeds/000 ch. 6).
                    executor.revive(version=version, by="user", reason="kept by the user", at=at)
                executor.promote(version=version, by="user", at=at)
                _write_current(name_dir, version)
            elif action == "quarantine":
                executor.quarantine(version=version, check="manual", file=None, reason=reason, at=at)
            elif action == "rehabilitate":
                vdir = name_dir / version
                if not vdir.exists():
                    archived = origin_dir / ".archive" / entry["name"] / version
                    if archived.exists():
                        vdir.parent.mkdir(parents=True, exist_ok=True)
                        shutil.move(str(archived), str(vdir))
                check = verify_executor(vdir, rt.verify_key)
                if not check.ok:
                    bad = check.failure
                    raise MetnosError(f"{name} {version} still fails {bad.file}: {bad.check}: {bad.detail}; fix and re-sign it first")
                executor.rehabilitate(version=version, digest=check.digest, by="user", at=at)
            elif action == "archive":
                executor.archive(version=version, reason=reason, by="user", at=at)
                move_to_archive(rt.workspace, entry["origin"], entry["name"], version)
        except LifecycleError as e:
            raise MetnosError(str(e)) from None
        rt.log.save(executor)
        rt.refresh()
        now = rt.catalogue_state()["executors"][f"{entry['origin']}/{entry['name']}"]
    return version, now["versions"][version], now["current"] == version


def _write_current(name_dir: Path, version: str) -> None:
    tmp = name_dir / ".CURRENT.tmp"
    tmp.write_text(version + "\n")
    os.replace(tmp, name_dir / "CURRENT")


def run(name: str, args: dict[str, Any], *, version: str | None, caller: dict[str, Any]) -> Call:
    """One executor through the whole path (checks, sandbox, events), outside any turn."""
    with wiring.boot() as rt:
        return rt.call(name, args, caller=caller, version=version)
