"""The first boot of the mnestome: planting the seed mnests (seeds/004 ch. 6).

At the boot that activates the seed executors ("Seed -> Active after
signature check", seeds/000), the pairs :mod:`metnos.runtime.mnestome.seed` reads off
their contracts become mnests at the bootstrap weight, all at the boot's
clock reading, so the pre-filter has a prior before the first turn and the
ager fades what is never walked.

"First boot" is decided by the log, not by a flag on disk: as long as the
log holds no seed mnest, the mnestome has not had its first boot. A
workspace made before seed mnests existed therefore gets them at its next
boot; once any seed mnest is in the log, nothing is planted again, even if
the user has archived them all since, and a seed executor that was not
active at that boot (quarantined, say) gets none later: from then on the
mnestome learns only from use.

A pair the log already knows (any mnest from A to B, in any state or
version) keeps its history and gets no seed: what was observed outranks a
prior. Ids are derived from the key, and each key is also looked up in the
log as :mod:`metnos.runtime.mnestome.record` does, so a seed can never become a
second mnest for a tuple.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from domain.mnest import Mnest, mnest_id
from metnos.runtime.mnestome import source as src_mod
from metnos.runtime.mnestome.seed import SeedExecutor, seed_pairs
from projections.catalog import invocable

SEED = "seed"


def seed_mnests(source: Any, executors: Iterable[SeedExecutor], at: datetime) -> list[Mnest]:
    """The seed mnests to create at ``at``, events pending; [] once the log holds any.

    ``executors`` are the active seed executors at their installed versions.
    Nothing is saved here: the caller commits them in one transaction.
    """
    state = src_mod.mnestome_state(source)
    mnests = state["mnests"].values()
    if any(m["origin"] == SEED for m in mnests):
        return []
    known = {(m["src_executor"], m["dst_executor"]) for m in mnests}
    log = src_mod.log_of(source)
    planted = []
    for pair in seed_pairs(executors):
        if (pair.src, pair.dst) in known:
            continue
        if src_mod.load(log, mnest_id(pair.src, pair.src_version, pair.dst, pair.dst_version)) is not None:
            continue
        planted.append(Mnest.seed(src=pair.src, src_version=pair.src_version, dst=pair.dst,
                                  dst_version=pair.dst_version, at=at, tags=[]))
    return planted


def active_seed_executors(runtime: Any) -> list[Any]:
    """The seed executors a turn may call, each at the version the catalogue makes current."""
    offered = invocable(runtime.catalogue_state())
    return [
        le for le in runtime.report.loaded
        if le.origin == SEED and le.name in offered
        and offered[le.name]["origin"] == SEED and offered[le.name]["version"] == le.version
    ]


def plant_seed_mnests(runtime: Any) -> int:
    """Create the seed mnests if the mnestome has not had its first boot; returns how many."""
    planted = seed_mnests(runtime, active_seed_executors(runtime), runtime.clock())
    if planted:
        runtime.log.save(*planted)
    return len(planted)
