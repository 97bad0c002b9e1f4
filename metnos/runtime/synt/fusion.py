"""Fused made real (seeds/000 ch. 6): what a merge replaces, kept while cited, then archived; and defused.

When an approved merge or generalise proposal installs its executor, the
executors it stands in for become ``fused`` into it. A fused version stays
loaded and invocable while a mnest still cites it (a schedule, a habit of
the user's); the maintenance archives it once none does. Defusing a fused
executor makes every executor it replaced active again (back from the
archive if it went there) and archives the one that replaced them.
"""

from __future__ import annotations

import shutil
from typing import Any
from uuid import UUID

from domain.executor import Executor, LifecycleError, executor_id
from domain.errors import MetnosError

FUSING_KINDS = ("merge", "generalise")


def _entry(runtime: Any, name: str) -> dict[str, Any] | None:
    order = {"seed": 0, "synt": 1, "skill": 2}
    found = [e for e in runtime.catalogue_state()["executors"].values() if e["name"] == name]
    return sorted(found, key=lambda e: order.get(e["origin"], 3))[0] if found else None


def fuse_sources(runtime: Any, sources: list[str], into: str, at: Any) -> list[Executor]:
    """Mark the current version of each source executor fused into ``into``."""
    fused = []
    for name in sources:
        entry = _entry(runtime, name)
        if entry is None or entry["current"] is None:
            continue
        e: Executor = runtime.log.repository.get(UUID(entry["id"]))
        try:
            e.fuse(version=entry["current"], into=into, at=at)
        except LifecycleError:
            continue
        fused.append(e)
    return fused


def _move(runtime: Any, origin: str, name: str, version: str, *, to_archive: bool) -> None:
    live = runtime.workspace.executors_origin_dir(origin) / name / version
    archived = runtime.workspace.executors_origin_dir(origin) / ".archive" / name / version
    src, dst = (live, archived) if to_archive else (archived, live)
    if src.exists() and not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(src), str(dst))


def retire_fused(runtime: Any, at: Any) -> list[Executor]:
    """Archive every fused version that no active mnest cites any more."""
    mnests = runtime.mnestome.catch_up(runtime.log)["mnests"].values()
    cited = {n for m in mnests if m["state"] == "active" for n in (m["src_executor"], m["dst_executor"])}
    retired = []
    for entry in runtime.catalogue_state()["executors"].values():
        for version, v in entry["versions"].items():
            if v["state"] != "fused" or entry["name"] in cited:
                continue
            e: Executor = runtime.log.repository.get(UUID(entry["id"]))
            e.archive(version=version, reason="fused, and no mnest cites it any more", by="maintenance", at=at)
            _move(runtime, entry["origin"], entry["name"], version, to_archive=True)
            retired.append(e)
    return retired


def defuse(runtime: Any, name: str) -> list[str]:
    """Undo the fusion that produced ``name``: its sources active again, ``name`` archived."""
    state = runtime.proposals.catch_up(runtime.log)
    made = [p for p in state["proposals"].values()
            if p["kind"] in FUSING_KINDS and p["status"] == "installed" and p["stages"][-1].get("name") == name]
    if not made:
        raise MetnosError(f"{name} is not the product of a merge or a generalisation; nothing to defuse")
    sources = made[-1]["source"].get("executors") or []
    at = runtime.clock()
    changed: list[Executor] = []
    for source in sources:
        entry = _entry(runtime, source)
        if entry is None:
            continue
        for version, v in entry["versions"].items():
            if v["state"] in ("fused", "archived"):
                _move(runtime, entry["origin"], source, version, to_archive=False)
                e: Executor = runtime.log.repository.get(UUID(entry["id"]))
                e.defuse(version=version, by="user", at=at)
                changed.append(e)
    merged: Executor = runtime.log.repository.get(executor_id("synt", name))
    for version, v in merged.versions.items():
        if v["state"] != "archived":
            merged.archive(version=version, reason="defused: the executors it replaced are back", by="user", at=at)
            _move(runtime, "synt", name, version, to_archive=True)
    runtime.log.save(*changed, merged)
    runtime.refresh()
    return sources
