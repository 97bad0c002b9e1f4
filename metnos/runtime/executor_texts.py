"""What the executors say of themselves, as texts of the language catalogue (seeds/002 ch. 11.2.7, layer 2).

Each current executor gives two English texts, ``executor.<name>.summary`` (one line, what
``executors list`` shows) and ``executor.<name>.description`` (the manifest's ``[description]
en``). A translation the manifest carries is fresh only while ``[translated_from]`` names the
hash of the English it was made from: a manifest whose English changed since, or that names
none, owes its translation to the nightly drafts like any text of the catalogue, and English is
said until one is promoted into the workspace's catalogue.
"""

from __future__ import annotations

from collections.abc import Mapping

from metnos.mechanisms.executors.loader import LoadedExecutor
from metnos.settings import i18n

PREFIX = "executor."


def key(name: str, part: str) -> str:
    return f"{PREFIX}{name}.{part}"


def executor_texts(defaults: Mapping[str, LoadedExecutor]) -> tuple[dict[str, str], dict[str, dict[str, dict[str, str]]]]:
    """(key -> English, language -> key -> the manifest's translation and the source hash it names)."""
    source: dict[str, str] = {}
    translations: dict[str, dict[str, dict[str, str]]] = {}
    for name, loaded in sorted(defaults.items()):
        manifest = loaded.manifest
        english = manifest.description[i18n.SOURCE]
        source[key(name, "summary")] = _literal(manifest.executor.summary)
        source[key(name, "description")] = _literal(english)
        for language, text in manifest.description.items():
            made_from = manifest.translated_from.get(language)
            if language == i18n.SOURCE or made_from is None:
                continue
            # The manifest hashes its English as written; the catalogue hashes the template it keeps.
            fresh = made_from == i18n.source_hash(english)
            entry = {"text": _literal(text), "source_hash": i18n.source_hash(_literal(english)) if fresh else made_from}
            translations.setdefault(language, {})[key(name, "description")] = entry
    return source, translations


def with_executors(catalogue: i18n.Catalogue, defaults: Mapping[str, LoadedExecutor]) -> i18n.Catalogue:
    return catalogue.joined(*executor_texts(defaults))


def said(catalogue: i18n.Catalogue, name: str, part: str, language: str, english: str) -> str:
    """An executor's summary or description in ``language`` when a fresh translation exists, else ``english``."""
    found = catalogue.fresh(key(name, part), language) if language != i18n.SOURCE else None
    return found.format() if found is not None else english


def _literal(text: str) -> str:
    """``text`` as a catalogue template with no field: its braces doubled, so filling it gives it back."""
    return text.replace("{", "{{").replace("}", "}}")
