"""How far a turn may go: the autonomy levels and the one table they derive from.

Three levels (seeds/000 and seeds/003 ch. 6): ``read_only`` only looks,
``supervised`` (the default) acts and asks, ``full`` is the level the seeds
let widen the *shell* (seeds/000 ch. 5.5: the sandbox profiles), never the
core (forbidden paths, the vaglio's guard) and never the precautionary
asymmetry (seeds/000, the invocation flow: a call with side effects that is
not idempotent asks for confirmation "even within the Full autonomy level"). Everything a
level changes is read from :data:`POLICY`, so the sandbox profile, what is
offered and the vaglio cannot disagree about what a level means.

What ``full`` widens today: nothing beyond ``supervised``. The shell it may
widen is the profile each executor signs (``profile.lock``), and seeds/003
ch. 6 leaves the level-by-capability table that would widen it to a policy
not yet written; so a ``full`` turn runs with the grants the manifest
declares, and every question ``supervised`` asks, ``full`` asks too. No
level answers for the user: only the user does (a terminal, a button, an
elicitation, or ``--yes`` / ``"approve": "yes"`` given with the request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metnos.mechanisms.sandbox.profile import SandboxProfile
# The names are settings ([runtime] autonomy, --autonomy); what a level changes is decided here.
from metnos.settings.autonomy import DEFAULT, FULL, READ_ONLY, SUPERVISED, AutonomyError, parse_level

__all__ = ["DEFAULT", "FULL", "POLICY", "READ_ONLY", "SUPERVISED", "AutonomyError", "LevelRule", "offers", "parse_level",
           "refusal", "rule", "sandbox_profile"]


@dataclass(frozen=True)
class LevelRule:
    # Every grant mounted read-only: the kernel refuses a write whatever the executor declares.
    mounts_read_only: bool
    # An executor (or builtin) that declares side effects is never offered nor run.
    offers_side_effects: bool


# No field answers the vaglio's question: the precautionary asymmetry holds at every level.
POLICY: dict[str, LevelRule] = {
    READ_ONLY: LevelRule(mounts_read_only=True, offers_side_effects=False),
    SUPERVISED: LevelRule(mounts_read_only=False, offers_side_effects=True),
    FULL: LevelRule(mounts_read_only=False, offers_side_effects=True),
}


def rule(level: str) -> LevelRule:
    return POLICY[parse_level(level)]


def sandbox_profile(level: str, profile: SandboxProfile) -> SandboxProfile:
    """The profile an invocation runs under at ``level``: under read_only every
    write grant becomes a read grant, so nothing is bound writable."""
    if not rule(level).mounts_read_only or not profile.fs_write:
        return profile
    reads = tuple(dict.fromkeys((*profile.fs_read, *profile.fs_write)))
    return profile.model_copy(update={"fs_read": reads, "fs_write": ()})


def offers(level: str, *, side_effects: bool) -> bool:
    """Whether a tool with (or without) side effects may be offered and run at ``level``."""
    return rule(level).offers_side_effects or not side_effects


def refusal(level: str, name: str) -> dict[str, Any]:
    """The observation for a call the level refuses (the model asked for it by name)."""
    return {"ok": False, "error_class": "autonomy_read_only",
            "error": f"{name} changes things and this turn runs read-only (autonomy {level}): it was not run",
            "hint": "only look: use executors that read, or tell the user what you would change"}
