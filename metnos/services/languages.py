"""The languages Metnos speaks: their state, the drafts to review, promoting them, adding one.

The catalogues are files (metnos/settings/i18n): the shipped English and
Italian, overlaid by the workspace's own under ``<data>/i18n``, and what
the current executors say of themselves (their summary and description,
``executor.<name>.*``, with the translations their manifests carry). Adding a
language writes an empty catalogue there; the nightly
``i18n_translate_pending`` job drafts its texts; promoting moves a reviewed
draft into use, only while the English it translates is still the same.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from domain.errors import MetnosError
from metnos.runtime.executor_texts import with_executors
from metnos.services import wiring
from metnos.settings import i18n

_CODE = re.compile(r"^[a-z]{2,3}$")


def _catalogue() -> tuple[Path, i18n.Catalogue]:
    """The workspace's catalogue folder, and its texts with those of the executors it has (read, not born)."""
    with wiring.boot(birth=False) as rt:
        folder = rt.workspace.i18n_dir
        return folder, with_executors(i18n.load(folder), rt.report.defaults)


def status() -> list[dict[str, Any]]:
    folder, catalogue = _catalogue()
    rows = []
    for language in catalogue.languages():
        missing = catalogue.missing(language)
        rows.append({"language": language, "texts": len(catalogue.source), "translated": len(catalogue.source) - len(missing),
                     "missing": len(missing), "stale": len(catalogue.stale(language)),
                     "drafts": len(i18n.read_pending(folder, language))})
    return rows


def _known(language: str, catalogue: i18n.Catalogue) -> None:
    if language == i18n.SOURCE:
        raise MetnosError("English is the source: its texts are edited in metnos/settings/i18n/en.json, not reviewed")
    if language not in catalogue.languages():
        raise MetnosError(f"no language {language!r}; known: {', '.join(catalogue.languages())} (add one with `metnos i18n add {language}`)")


def review(language: str) -> list[dict[str, Any]]:
    """Each draft of ``language`` beside the English it translates and the text in use, if any."""
    folder, catalogue = _catalogue()
    _known(language, catalogue)
    rows = []
    for key, draft in sorted(i18n.read_pending(folder, language).items()):
        english = catalogue.source.get(key)
        current = catalogue.translations.get(language, {}).get(key)
        rows.append({"key": key, "english": english, "draft": draft["text"], "model": draft.get("model"),
                     "in_use": current["text"] if current else None,
                     "outdated": english is None or draft.get("source_hash") != i18n.source_hash(english)})
    return rows


def promote(language: str, keys: list[str] | None = None) -> dict[str, list[str]]:
    """Put the drafts of ``keys`` (all when None) in use; a draft whose English changed since is left, and said."""
    folder, catalogue = _catalogue()
    _known(language, catalogue)
    drafts = i18n.read_pending(folder, language)
    wanted = sorted(drafts) if keys is None else keys
    unknown = [k for k in wanted if k not in drafts]
    if unknown:
        raise MetnosError(f"no draft for {', '.join(unknown)} in {language}; see `metnos i18n review {language}`")
    path = folder / f"{language}.json"
    in_use = dict(i18n.read(path)["texts"]) if path.is_file() else {}
    promoted, outdated = [], []
    for key in wanted:
        english = catalogue.source.get(key)
        if english is None or drafts[key].get("source_hash") != i18n.source_hash(english):
            outdated.append(key)
            continue
        in_use[key] = {"text": drafts[key]["text"], "source_hash": drafts[key]["source_hash"]}
        del drafts[key]
        promoted.append(key)
    i18n.write(path, language, in_use)
    i18n.write_pending(folder, language, drafts)
    return {"promoted": promoted, "outdated": outdated}


def add(language: str) -> dict[str, Any]:
    """Start ``language``: an empty catalogue, so every text is owed to the nightly drafts."""
    if not _CODE.match(language):
        raise MetnosError(f"{language!r} is not a language code: write its ISO 639-1 code, two lower-case letters (fr, de, es)")
    folder, catalogue = _catalogue()
    if language in catalogue.languages():
        raise MetnosError(f"{language} is already known; see `metnos i18n status`")
    i18n.write(folder / f"{language}.json", language, {})
    return {"language": language, "missing": len(catalogue.source)}
