"""The per-skill sandbox watchdog (seeds/002 ch. 11.2, ``skill_sandbox_watchdog``).

Every imported skill runs in the one sandbox profile its manifest derives;
the seeds ask for a sandbox per skill once the install grows past a
household: five or more third-party skill executors, or one paired guest.
This job counts both each night (the executors of origin ``skill`` in the
catalogue; the guests of domain/household.py) and, when a threshold is
crossed, tells the user on the schedule's channel. The figures are a
DigestWritten event every night.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.application import AggregateNotFoundError

from domain.household import HOST, household_id
from metnos.runtime.jobs import CallbackContext, CallbackResult, digest

JOB = "skill_sandbox_watchdog"
SKILLS_THRESHOLD = 5
GUESTS_THRESHOLD = 1


def third_party_skills(catalogue: dict[str, Any]) -> list[str]:
    return sorted(e["name"] for e in catalogue["executors"].values() if e["origin"] == "skill")


def paired_guests(log: Any) -> list[str]:
    try:
        household = log.repository.get(household_id())
    except AggregateNotFoundError:
        return []
    return sorted(actor for actor in household.pairings.values() if actor != HOST)


def run_skill_sandbox_watchdog(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    skills = third_party_skills(ctx.runtime.catalogue_state())
    guests = len(paired_guests(ctx.runtime.log))
    crossed = []
    if len(skills) >= SKILLS_THRESHOLD:
        crossed.append(f"{len(skills)} third-party skill executors (threshold {SKILLS_THRESHOLD})")
    if guests >= GUESTS_THRESHOLD:
        crossed.append(f"{guests} paired guest(s) (threshold {GUESTS_THRESHOLD})")
    text = ""
    if crossed:
        text = ("A sandbox per skill is now advised: " + " and ".join(crossed)
                + ". Until then every skill shares the profile its manifest derives; review them with `metnos skills list`.")
    return digest(ctx, JOB, {"skills": skills, "guests": guests, "crossed": crossed}, text)
