"""Quarantined executors a request would have been offered: found, recorded, told.

A quarantined executor (a file changed after signing, a birth test that
failed, ``metnos executors quarantine``) is never offered nor run. Left at
that, it would vanish from a turn without a word, and the user would read "I
could not do that" with no cause. So each turn ranks the quarantined
executors together with the live ones, in one pre-filter index and by the
same rules (:func:`metnos.runtime.turn.shortlist.complete`, with the turn's
``[turn] offer``), and those that would have been offered, at an autonomy
level that offers them, are recorded (``Turn.QuarantinedNotOffered``) and told on every way in:
which, why, and the command that shows it.

What the pre-filter reads of a quarantined executor is its manifest: the
loaded one when only the lifecycle blocks it; else the folder's
``manifest.toml``, parsed as data (it is only ranked, never run); else, for
a seed, the shipped one; with none readable, its name alone.

The mnestome's boost, which only reorders, is not applied to this ranking:
it comes through a port, once per turn, for the live shortlist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from domain.executor import QUARANTINED
from domain.turn import Turn
from executors import SEED_DIR
from metnos.mechanisms.executors.loader import LoadReport
from metnos.mechanisms.executors.manifest import Manifest, ManifestError, load_manifest
from metnos.mechanisms.executors.signing import MANIFEST
from metnos.mechanisms.sandbox import autonomy
from metnos.runtime.step.catalogue import QuarantinedExecutor, TurnCatalogue, catalogue_entry
from metnos.runtime.step.prefilter import CatalogueEntry, CatalogueError
from metnos.runtime.turn.shortlist import complete
from projections.catalog import invocable
from metnos.settings import i18n

# Seeds first, as the catalogue offers them: a seed's name is never shadowed.
_ORIGIN_ORDER = {"seed": 0, "synt": 1, "skill": 2}


@dataclass(frozen=True)
class Held:
    """A quarantined version in use, as the catalogue projection has it (cheap: nothing read from disk)."""

    name: str
    origin: str
    version: str
    reason: str
    check: str


def held_versions(catalogue_state: Mapping[str, Any]) -> tuple[Held, ...]:
    """Each executor name nothing active answers to whose version in use is quarantined:
    its current version, or, when it never had one, its highest quarantined version."""
    offered = invocable(dict(catalogue_state))
    found: dict[str, Held] = {}
    for entry in sorted(catalogue_state["executors"].values(), key=lambda e: (_ORIGIN_ORDER.get(e["origin"], 3), e["name"])):
        name = entry["name"]
        if name in offered or name in found:
            continue
        version = _quarantined_version(entry)
        if version is None:
            continue
        state = entry["versions"][version]
        found[name] = Held(name, entry["origin"], version, state.get("reason") or i18n.english("turn.quarantine.no_reason"), state.get("check") or "")
    return tuple(found[n] for n in sorted(found))


def ranked(held: Iterable[Held], report: LoadReport) -> tuple[QuarantinedExecutor, ...]:
    """What the pre-filter reads of each held version (its manifest, read here)."""
    found = []
    for h in held:
        entry = _entry(h.name, h.version, h.origin, report)
        if entry is not None:
            found.append(QuarantinedExecutor(entry, h.origin, h.reason, h.check))
    return tuple(found)


def find_quarantined(catalogue_state: Mapping[str, Any], report: LoadReport) -> tuple[QuarantinedExecutor, ...]:
    return ranked(held_versions(catalogue_state), report)


def _quarantined_version(entry: Mapping[str, Any]) -> str | None:
    versions = entry["versions"]
    current = entry["current"]
    if current is not None:
        return current if versions.get(current, {}).get("state") == QUARANTINED else None
    held = [v for v, state in versions.items() if state.get("state") == QUARANTINED]
    return max(held, key=_version_key) if held else None


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def _entry(name: str, version: str, origin: str, report: LoadReport) -> CatalogueEntry | None:
    manifest = _manifest(name, version, origin, report)
    try:
        if manifest is None:
            return CatalogueEntry(name=name, version=version, summary=name.replace("_", " "))
        return dataclasses.replace(catalogue_entry(manifest), name=name, version=version)
    except CatalogueError:
        # A folder name no executor may have: it could never be offered.
        return None


def _manifest(name: str, version: str, origin: str, report: LoadReport) -> Manifest | None:
    for loaded in report.loaded:
        if (loaded.origin, loaded.name, loaded.version) == (origin, name, version):
            return loaded.manifest
    places = [q.dir / MANIFEST for q in report.quarantined if (q.origin, q.name, q.version) == (origin, name, version)]
    if origin == "seed":
        places.append(SEED_DIR / name / MANIFEST)
    for place in places:
        try:
            return load_manifest(place)
        except (ManifestError, OSError, ValueError):
            continue
    return None


def would_have_offered(catalogue: TurnCatalogue, request_text: str, *, level: str, pool_size: int,
                       offer: str = "shortlist") -> list[QuarantinedExecutor]:
    """The quarantined executors the turn's offer (``[turn] offer``) would have held for ``request_text`` at autonomy ``level``."""
    if not catalogue.quarantined:
        return []
    index = catalogue.index_with_quarantined()
    ranking = complete(index.query(request_text, pool_size=pool_size).to_json(), index, request_text, offer=offer, pool_size=pool_size)
    shortlisted = {c["name"] for c in ranking["candidates"]}
    return [q for q in catalogue.quarantined
            if q.name in shortlisted and autonomy.offers(level, side_effects=q.entry.side_effects)]


def record_quarantined(record: Callable[..., None], catalogue: TurnCatalogue, request_text: str, *, level: str, pool_size: int,
                       offer: str = "shortlist") -> None:
    """Record ``Turn.QuarantinedNotOffered`` when the request would have been offered a quarantined executor."""
    missed = would_have_offered(catalogue, request_text, level=level, pool_size=pool_size, offer=offer)
    if missed:
        record(Turn.QuarantinedNotOffered, executors=[q.to_json() for q in missed])


def show_command(name: str) -> str:
    return f"metnos executors show {name}"


# An imported skill waits for its approval, which its reason names (`metnos skills approve NAME`).
_APPROVAL = "approval"


def _commands(executor: Mapping[str, Any]) -> str:
    name = executor["name"]
    if executor.get("check") == _APPROVAL:
        return i18n.english("turn.quarantine.shows", command=show_command(name))
    return i18n.english("turn.quarantine.shows_and_rehabilitates", command=show_command(name), name=name)


def notice(executor: Mapping[str, Any]) -> str:
    """One sentence for the user: which executor the request missed, why it is quarantined, the command that shows it."""
    return i18n.english("turn.quarantine.offered", name=executor["name"], version=executor["version"], reason=executor["reason"],
                        commands=_commands(executor))


def refusal_message(executor: Mapping[str, Any]) -> str:
    """The same for a call that names a quarantined executor (an MCP client's)."""
    return i18n.english("turn.quarantine.called", name=executor["name"], version=executor["version"], reason=executor["reason"],
                        commands=_commands(executor))


def told(executors: Iterable[Mapping[str, Any]], language: str = i18n.SOURCE) -> list[dict[str, str]]:
    """Recorded quarantined executors as every way in gives them: each with its command and notice, the notice in
    ``language`` (the request's; the event keeps the English)."""
    return [{**e, "show": show_command(e["name"]), "notice": i18n.said_words(notice(e), language)} for e in executors]


def notices_of(events: Iterable[Any]) -> list[dict[str, str]]:
    """The quarantined executors a turn's events say it was not offered, as :func:`told` gives them, in the
    language its ``TurnStarted`` recorded."""
    events = list(events)
    language = next((e.language for e in events if isinstance(e, Turn.TurnStarted)), i18n.SOURCE)
    return told((e for event in events if isinstance(event, Turn.QuarantinedNotOffered) for e in event.executors), language)


def quarantined_by_name(catalogue: TurnCatalogue, name: str) -> QuarantinedExecutor | None:
    return next((q for q in catalogue.quarantined if q.name == name), None)

