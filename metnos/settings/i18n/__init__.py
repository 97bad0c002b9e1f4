"""User-facing texts, one catalogue per language (seeds/002 ch. 11.2.5 and 11.2.7).

English is the source: ``en.json`` holds every text by key. Each other
language holds, per key, its text and the ``source_hash`` of the English it
translates; when the English changes, the hash no longer matches and the
translation is stale: English is shown until a fresh one is promoted. The
catalogues shipped here (``en``, ``it``) are overlaid by the workspace's own
(``<data>/i18n/<lang>.json``, latest wins), where `metnos i18n add LANG`
starts a language and `metnos i18n promote` puts reviewed drafts; the
nightly ``i18n_translate_pending`` job writes its drafts beside them, in
``<data>/i18n/_pending/<lang>.json``, never straight into use.

The prompts to the model are here too (``prompt.*``), their literal braces
doubled as ``str.format`` wants; the model is told them in English, byte for
byte what recorded turns replay against (tests/fixtures/prompts_en_frozen.json).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from metnos.settings.loader import workspace_in_force

SOURCE = "en"
SHIPPED = Path(__file__).parent
PENDING = "_pending"


class CatalogueError(ValueError):
    """A catalogue file or entry that cannot be used: it says which and how to fix it."""


def source_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def fields_of(text: str) -> set[str]:
    """The ``{name}`` fields a text fills: a translation must keep exactly these."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def template_problem(text: str) -> str | None:
    """Why ``text`` cannot be filled (a lone ``{`` or ``}``: literal braces are doubled), or None."""
    try:
        fields_of(text)
    except ValueError as e:
        return f"its braces do not parse ({e}); a literal brace is written doubled, {{{{ or }}}}"
    return None


def read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CatalogueError(f"cannot read the catalogue {path}: {e}; fix or remove the file") from None
    if not isinstance(data, dict) or not isinstance(data.get("texts"), dict):
        raise CatalogueError(f"the catalogue {path} has no \"texts\" object; fix or remove the file")
    return data


def write(path: Path, language: str, texts: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"language": language, "texts": dict(sorted(texts.items()))}, ensure_ascii=False, indent=1) + "\n",
                   encoding="utf-8")
    tmp.replace(path)


# Compared and hashed by identity: a catalogue is read once and cached whole (``texts``), and the
# lookups made from it (``_by_english``, ``_error_patterns``) are cached with it.
@dataclass(eq=False)
class Catalogue:
    source: dict[str, str]
    # language -> key -> {"text", "source_hash"}; the workspace's entries over the shipped ones.
    translations: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)

    def languages(self) -> list[str]:
        return sorted({SOURCE, *self.translations})

    def fresh(self, key: str, language: str) -> str | None:
        entry = self.translations.get(language, {}).get(key)
        if entry is None or key not in self.source or entry.get("source_hash") != source_hash(self.source[key]):
            return None
        return entry["text"]

    def text(self, key: str, language: str = SOURCE, **values: Any) -> str:
        """``key`` in ``language`` when a fresh translation exists, else in English; filled with ``values``."""
        if key not in self.source:
            raise CatalogueError(f"no text {key!r} in the English catalogue ({SHIPPED / 'en.json'})")
        template = (self.fresh(key, language) if language != SOURCE else None) or self.source[key]
        return template.format(**values)

    def missing(self, language: str) -> list[str]:
        """The keys with no fresh translation in ``language``: never translated, or stale."""
        if language == SOURCE:
            return []
        return [k for k in sorted(self.source) if self.fresh(k, language) is None]

    def stale(self, language: str) -> list[str]:
        have = self.translations.get(language, {})
        return [k for k in sorted(self.source) if k in have and self.fresh(k, language) is None]

    def joined(self, source: Mapping[str, str], translations: Mapping[str, Mapping[str, dict[str, str]]]) -> Catalogue:
        """This catalogue with more texts (an executor's description and the translations its manifest gives): of a
        text translated in both, the fresh one is kept, the workspace's first (it was reviewed here)."""
        merged_source = {**self.source, **source}
        merged: dict[str, dict[str, dict[str, str]]] = {lang: dict(entries) for lang, entries in self.translations.items()}
        for language, entries in translations.items():
            have = merged.setdefault(language, {})
            for key, entry in entries.items():
                mine = have.get(key)
                if mine is None or mine.get("source_hash") != source_hash(merged_source.get(key, "")):
                    have[key] = dict(entry)
        return Catalogue(source=merged_source, translations=merged)


def _merge(into: dict[str, dict[str, dict[str, str]]], folder: Path) -> None:
    for path in sorted(folder.glob("*.json")):
        if path.stem == SOURCE:
            continue
        into.setdefault(path.stem, {}).update(read(path)["texts"])


def load(workspace_dir: Path | None = None) -> Catalogue:
    """The shipped catalogues, overlaid by those of ``workspace_dir`` (a workspace's ``i18n`` folder)."""
    translations: dict[str, dict[str, dict[str, str]]] = {}
    _merge(translations, SHIPPED)
    if workspace_dir is not None and workspace_dir.is_dir():
        _merge(translations, workspace_dir)
    return Catalogue(source=dict(read(SHIPPED / f"{SOURCE}.json")["texts"]), translations=translations)


def _stamp(folder: Path | None) -> tuple[Any, ...]:
    if folder is None or not folder.is_dir():
        return ()
    return tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob("*.json")))


@lru_cache(maxsize=8)
def _cached(folder: Path | None, stamp: tuple[Any, ...]) -> Catalogue:
    return load(folder)


def texts(workspace_dir: Path | None = None) -> Catalogue:
    """The catalogue in force for ``workspace_dir``, read again when one of its files changed."""
    return _cached(workspace_dir, _stamp(workspace_dir))


def read_pending(workspace_dir: Path, language: str) -> dict[str, dict[str, str]]:
    path = workspace_dir / PENDING / f"{language}.json"
    return dict(read(path)["texts"]) if path.is_file() else {}


def write_pending(workspace_dir: Path, language: str, drafts: dict[str, dict[str, str]]) -> None:
    path = workspace_dir / PENDING / f"{language}.json"
    if drafts:
        write(path, language, drafts)
    elif path.exists():
        path.unlink()


def in_force() -> Catalogue:
    """The catalogue of the workspace the command runs in (the shipped one outside a command)."""
    workspace = workspace_in_force()
    return texts(workspace.i18n_dir if workspace is not None else None)


# Where a command reads its language, first found first: Metnos's own setting, then the POSIX locale's order.
LANGUAGE_ENV = ("METNOS_LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def command_language(environ: Mapping[str, str] | None = None) -> str:
    """The language a command speaks in: ``$METNOS_LANGUAGE`` or the locale (``it_IT.UTF-8`` -> ``it``) when the
    catalogue in force has it, English otherwise (``C``, ``POSIX``, or a language with no catalogue)."""
    env = os.environ if environ is None else environ
    for name in LANGUAGE_ENV:
        value = env.get(name, "")
        if value:
            code = value.split(".")[0].split("_")[0].split("-")[0].lower()
            return code if code in in_force().languages() else SOURCE
    return SOURCE


def said(key: str, **values: Any) -> str:
    """``key`` in the command's language (:func:`command_language`)."""
    return in_force().text(key, command_language(), **values)



# Texts said by their English words, not a key: the help of the command line (argparse hands its own
# words to a translation function, and every option's help is a string in its module) and the
# messages of errors, raised in English wherever they are (the log and the tests read that) and said
# in the command's language where the CLI prints them.
HELP, ARGPARSE, ERROR = "help.", "argparse.", "error."


@lru_cache(maxsize=8)
def _by_english(catalogue: Catalogue) -> dict[str, str]:
    """English text -> its key, for the texts found by their words (help and argparse's own); the
    catalogue holds them as templates with no field, their literal braces doubled."""
    return {text.format(): key for key, text in catalogue.source.items() if key.startswith((HELP, ARGPARSE))}


# An error template as it is tried: its pattern, its key, and its longest piece of words, which a message it
# makes must hold (a substring test rules out most templates before their pattern is run).
_Tried = tuple[re.Pattern[str], str, str]


@lru_cache(maxsize=16)
def _error_patterns(catalogue: Catalogue, family: str = ERROR) -> list[_Tried]:
    """Each template of ``family`` (``error.*``, ``turn.*``) as a pattern that matches the messages it makes, its
    fields captured as said."""
    tried = []
    for key, template in catalogue.source.items():
        if key.startswith(family):
            literals = [literal for literal, _, _, _ in string.Formatter().parse(template)]
            tried.append((re.compile(_pattern_of(template), re.DOTALL), key, max(literals, key=len), sum(map(len, literals))))
    # The most words of its own first: a template that is the start of another, or says in a field what another
    # says in words (``{key}={raw} is not {what}`` and ``{key}={raw} is not yes or no``), must not take its messages.
    return [(pattern, key, longest) for pattern, key, longest, _ in sorted(tried, key=lambda t: -t[3])]


@lru_cache(maxsize=16)
def _error_index(catalogue: Catalogue, family: str = ERROR) -> tuple[dict[str, list[_Tried]], list[_Tried]]:
    """The templates by the character they open with, those that open with a field among every character's, each
    list in the order of :func:`_error_patterns`; and those that open with a field, for any other character."""
    ordered = _error_patterns(catalogue, family)
    opening = {key: next(iter(string.Formatter().parse(catalogue.source[key])), ("",))[0][:1] or None for _, key, _ in ordered}
    anywhere = [t for t in ordered if opening[t[1]] is None]
    by_first = {c: [t for t in ordered if opening[t[1]] in (c, None)] for c in set(opening.values()) - {None}}
    return by_first, anywhere


def error_template(message: str, catalogue: Catalogue | None = None, family: str = ERROR) -> tuple[str, dict[str, str]] | None:
    """The key of the template of ``family`` (``error.*`` by default) that makes ``message`` and the text of each
    of its fields, or None."""
    catalogue = catalogue or in_force()
    by_first, anywhere = _error_index(catalogue, family)
    for pattern, key, longest in by_first.get(message[:1], anywhere):
        # A pattern of several fields that fails tries every split of the message: the substring test first.
        if longest not in message:
            continue
        found = pattern.fullmatch(message)
        if found is not None:
            return key, found.groupdict()
    return None


def _pattern_of(template: str) -> str:
    parts, seen = [], set()
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is None:
            continue
        parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
        seen.add(name)
    return "".join(parts)


def _filled(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each field replaced by the text captured for it (already as the message showed it)."""
    return "".join(literal + (values[name] if name is not None else "") for literal, name, _, _ in string.Formatter().parse(template))


def said_text(text: str, language: str | None = None) -> str:
    """``text``, an English help line or one of argparse's own, in ``language`` (the command's by default):
    found by its English words; itself when the catalogue has no fresh translation of it."""
    language = language or command_language()
    if language == SOURCE:
        return text
    catalogue = in_force()
    key = _by_english(catalogue).get(text)
    translated = catalogue.fresh(key, language) if key is not None else None
    return translated.format() if translated is not None else text


def said_error(message: str, language: str | None = None) -> str:
    """An error's message, made in English, in ``language`` (the command's by default): the ``error.*`` template
    that makes it gives its fields, the translation of that template says them; the message itself when no
    template matches or the translation is missing or stale. A field that is itself a message a template makes
    (the reason an invalid setting gives, the error a wrapper carries) is said the same way."""
    language = language or command_language()
    if language == SOURCE:
        return message
    return _said_error(in_force(), message, language, depth=3)


def said_error_or_as_raised(message: str, language: str | None = None) -> str:
    """:func:`said_error`, or the message as raised when saying it fails: the error being reported must still be said."""
    try:
        return said_error(message, language)
    except Exception:  # noqa: BLE001 - a broken catalogue must not hide the error it was saying
        return message


def _said_error(catalogue: Catalogue, message: str, language: str, depth: int) -> str:
    found = error_template(message, catalogue)
    return message if found is None else _said_as_found(catalogue, found, message, language, depth, _said_error)


def _said_as_found(catalogue: Catalogue, found: tuple[str, dict[str, str]], text: str, language: str, depth: int,
                   say: Callable[[Catalogue, str, str, int], str]) -> str:
    """``text``, which the template ``found`` makes, in the translation of that template (``text`` itself when it has
    none fresh), each field said by ``say`` while ``depth`` lasts."""
    key, values = found
    translated = catalogue.fresh(key, language)
    if translated is None:
        return text
    if depth > 1:
        values = {name: say(catalogue, value, language, depth - 1) for name, value in values.items()}
    return _filled(translated, values)


# The runtime's own words in what a turn tells (a failure's detail, a refusal's reason, an approval's reason, a
# quarantine notice): made in English from the catalogue's ``turn.*`` templates, the words events record and the
# model reads, byte for byte as before; said in the request's language where the person reads them, found again
# by their English words like an error's message. Data in them (a file name, an executor's own error) is left as is.
TURN = "turn."
# Joins the runtime makes of names (``delete_files or send_message``), said with the language's word for each.
_JOINED = {" or ": "turn.joined.or", " and ": "turn.joined.and"}
_NAMES_JOINED = {sep: re.compile(rf"[\w.\-]+(?:{sep}[\w.\-]+)+") for sep in _JOINED}


def english(key: str, **values: Any) -> str:
    """The ``turn.*`` text ``key`` in English, filled: what the runtime records and the model reads."""
    return texts().text(key, SOURCE, **values)


def said_words(text: str, language: str) -> str:
    """``text``, made by the runtime from ``turn.*`` templates (and the ``error.*`` messages it may carry), in
    ``language``: each template found by its English words says its fields in the translation; a part no template
    makes, or whose translation is missing or stale, is said as it is."""
    if language == SOURCE or not text:
        return text
    return _said_words(in_force(), text, language, depth=6)


# Where the runtime cuts a text it makes (a step's cause, a failure's detail, at 200 characters).
CUT = "…"


@lru_cache(maxsize=8)
def _cut_patterns(catalogue: Catalogue) -> list[tuple[re.Pattern[str], str]]:
    """Each ``turn.*`` template with a field as a pattern of the texts it makes cut after its last field began: every
    field is captured, the last one perhaps cut short, and of the words after it any beginning (none, some, all but
    the last character)."""
    tried = []
    for pattern, key, _ in _error_patterns(catalogue, TURN):
        parts = list(string.Formatter().parse(catalogue.source[key]))
        if not any(name for _, name, _, _ in parts):
            continue
        *fields, (tail, last_name, _, _) = parts
        whole = _pattern_of("".join(literal + ("{" + name + "}" if name else "") for literal, name, _, _ in fields))
        if last_name is not None:
            whole += re.escape(tail) + f"(?P<{last_name}>.+?)" if last_name not in {n for _, n, _, _ in fields} else re.escape(tail) + ".+?"
            tail = ""
        beginning = "".join(f"(?:{re.escape(c)}" for c in tail[:-1]) + ")?" * len(tail[:-1])
        tried.append((re.compile(whole + beginning, re.DOTALL), key))
    return tried


def _cut_template(body: str, catalogue: Catalogue) -> tuple[str, dict[str, str]] | None:
    """The ``turn.*`` template that makes ``body`` followed by more the runtime cut, and its fields; the field the
    cut fell in (the last, when nothing after it is left) marked cut."""
    for pattern, key in _cut_patterns(catalogue):
        found = pattern.fullmatch(body)
        if found is None:
            continue
        values = found.groupdict()
        last = [name for _, name, _, _ in string.Formatter().parse(catalogue.source[key]) if name][-1]
        if found.end(last) == len(body):
            values[last] += CUT
        return key, values
    return None


def _said_words(catalogue: Catalogue, text: str, language: str, depth: int) -> str:
    for family in (TURN, ERROR):
        # A cut text is taken by the template that makes the most of it, not by one whose last field takes the rest.
        cut = family == TURN and text.endswith(CUT)
        found = _cut_template(text[:-len(CUT)], catalogue) if cut else error_template(text, catalogue, family)
        if found is not None:
            return _said_as_found(catalogue, found, text, language, depth, _said_words)
    for separator, key in _JOINED.items():
        if _NAMES_JOINED[separator].fullmatch(text):
            return catalogue.text(key, language).join(text.split(separator))
    if "; " in text and depth > 1:
        # Reasons the runtime joins (a verdict's reason and the hint added to it; a grounding's problems).
        return "; ".join(_said_words(catalogue, part, language, depth - 1) for part in text.split("; "))
    return text
