"""What a schedule was approved to do, and whether a firing stays inside it.

A schedule whose target has side effects repeats them with nobody watching,
so it is approved when it is created (``ScheduleApproved``, in the same
transaction as ``ScheduleCreated``). The approval names a *template*: the
canonical hash of the target (executor or chain, with every step's argument
template) and of the arguments. A firing computes the same hash from what it
is about to run; if the schedule was never approved, or the hash differs (the
arguments were changed, the stored events were tampered with, a caller asks
for other arguments), nothing runs and the attempt is ``NotApproved``.

A target without side effects needs no approval: it can only read.
"""

from __future__ import annotations

from typing import Any

from domain.canonical import canonical_hash

NOT_APPROVED = "NotApproved"
VAGLIO_DENIED = "VaglioDenied"


def template_of(target: dict[str, Any], args: dict[str, Any]) -> str:
    return canonical_hash({"target": target, "args": args})


def target_executors(target: dict[str, Any]) -> list[str]:
    if target.get("kind") == "executor":
        return [str(target.get("name"))]
    if target.get("kind") == "chain":
        return [str(step.get("executor")) for step in target.get("steps") or [] if isinstance(step, dict)]
    return []


def side_effecting(report: Any, target: dict[str, Any]) -> list[str]:
    """The target's executors that change the world (an unknown one counts:
    what cannot be looked up is not assumed harmless)."""
    out = []
    for name in target_executors(target):
        found = report.get(name)
        if found is None or found.manifest.contract.side_effects:
            out.append(name)
    return out


def refusal(report: Any, approval: dict[str, Any] | None, target: dict[str, Any], args: dict[str, Any]) -> str | None:
    """Why a firing of ``target`` with ``args`` may not run; None when it may."""
    acting = side_effecting(report, target)
    if not acting:
        return None
    names = ", ".join(sorted(set(acting)))
    if approval is None:
        return (f"this schedule runs {names}, which has side effects, and it was never approved; "
                "cancel it and create it again so that you can approve it")
    if approval.get("template") != template_of(target, args):
        return (f"this firing would run {names} with a target or arguments other than the ones approved "
                f"(by {approval.get('by')}); nothing was run")
    return None
