"""agentskills.io skills as executors: import (quarantined until approved), list, approve."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from metnos.runtime.skills.importer import approve as approve_skill, imported, install_plan, plan_import
from metnos.services import wiring


def import_skill(path: Path, grants: dict[str, Any], confirm: Callable[[Any], bool]) -> list[Path] | None:
    """Translate the skill folder with the capabilities granted; ``confirm(plan)`` is asked before anything is
    installed. The folders installed, or None when not confirmed."""
    with wiring.boot(birth=False) as rt:
        plan = plan_import(rt, path, grants)
        if not confirm(plan):
            return None
        return install_plan(rt, plan)


def listed() -> list[dict[str, Any]]:
    with wiring.boot() as rt:
        return imported(rt)


def approve(name: str) -> dict[str, Any]:
    """Lift the quarantine after checking it; the version's state after the boot that follows, which runs its
    birth test like any executor's (approved is not yet born)."""
    with wiring.boot(birth=False) as rt:
        approve_skill(rt, name)
    with wiring.boot() as rt:
        return rt.catalogue_state()["executors"][f"skill/{name}"]["versions"]["1.0.0"]
