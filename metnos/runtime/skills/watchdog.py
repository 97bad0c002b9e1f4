"""The per-skill sandbox watchdog (seeds/002 ch. 11.2, ``skill_sandbox_watchdog``).

Every imported skill runs in the one sandbox profile its manifest derives;
the seeds ask for a sandbox per skill once the install grows past a
household: five or more third-party skill executors, or one guest able to
talk to the agent. This job counts both each night (the executors of origin
``skill`` in the catalogue; the Telegram chats allowed besides the first,
which is the host's) and, when a threshold is crossed, tells the user on
the schedule's channel. The figures are a DigestWritten event every night.
"""

from __future__ import annotations

from typing import Any

from metnos.runtime.jobs import CallbackContext, CallbackResult, digest
from metnos.settings.loader import for_workspace

JOB = "skill_sandbox_watchdog"
SKILLS_THRESHOLD = 5
GUESTS_THRESHOLD = 1


def third_party_skills(catalogue: dict[str, Any]) -> list[str]:
    return sorted(e["name"] for e in catalogue["executors"].values() if e["origin"] == "skill")


def guest_chats(workspace: Any) -> int:
    return max(0, len(for_workspace(workspace).settings.telegram.allowed_chats) - 1)


def run_skill_sandbox_watchdog(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    skills = third_party_skills(ctx.runtime.catalogue_state())
    guests = guest_chats(ctx.runtime.workspace)
    crossed = []
    if len(skills) >= SKILLS_THRESHOLD:
        crossed.append(f"{len(skills)} third-party skill executors (threshold {SKILLS_THRESHOLD})")
    if guests >= GUESTS_THRESHOLD:
        crossed.append(f"{guests} guest chat(s) besides yours (threshold {GUESTS_THRESHOLD})")
    text = ""
    if crossed:
        text = ("A sandbox per skill is now advised: " + " and ".join(crossed)
                + ". Until then every skill shares the profile its manifest derives; review them with `metnos skills list`.")
    return digest(ctx, JOB, {"skills": skills, "guests": guests, "crossed": crossed}, text)
