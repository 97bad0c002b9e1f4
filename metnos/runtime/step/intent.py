"""What a request names, read by rules: the paths and URLs in it, and whether
it asks for a change.

No model is asked and no request is known in advance: a path is a token that
starts with ``~/``, ``/``, ``./`` or ``$HOME``/``$WORKSPACE``; a path whose
last part has an extension names a file, any other a folder; a URL starts
with ``http://`` or ``https://``. The pre-filter uses this to put the source
a request needs on the shortlist (a named file is read, a folder is
searched, a page is fetched) and the auto-remediation to choose the
prerequisite of a call that has no data.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

_URL = re.compile(r"\bhttps?://[^\s<>\"'`]+", re.IGNORECASE)
_PATH = re.compile(r"(?<![\w:/.~$])((?:~|\$HOME|\$WORKSPACE)(?:/[^\s\"'`,;()<>]*)?|\.{1,2}/[^\s\"'`,;()<>]*|/[^\s\"'`,;()<>]+)")
_TRAILING = ".,;:!?)]}'\""
# An extension: a dot, then 1 to 8 letters or digits with at least one letter.
_EXTENSION = re.compile(r"\.(?=[a-z0-9]*[a-z])[a-z0-9]{1,8}$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class NamedTargets:
    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {"files": list(self.files), "folders": list(self.folders), "urls": list(self.urls)}


# The words that mark a folder as where something goes, English and Italian (closed classes of
# prepositions): "into ~/b" always; "in ~/b" only when an earlier path is marked as where it comes
# from ("from ~/a in ~/b", "di ~/a in ~/b"), since "in ~/a" alone says where something is.
TO_WORDS = frozenset("to into onto dentro verso".split())
TO_WORDS_AFTER_FROM = frozenset("in a nella nel".split())
FROM_WORDS = frozenset("from da dal dalla dai dalle di".split())
_WORDS = re.compile(r"[^\W_]+")


def destination(text: str) -> str | None:
    """The folder ``text`` names as where something goes: its last named path, when it is a folder,
    another path comes before it, and the word before it is a preposition of destination
    ("move the .log files from ~/logs into ~/logs/old", "porta le foto di ~/Scaricati in ~/Immagini")."""
    targets = named_targets(text)
    if not targets.folders:
        return None
    without_urls, found = _paths_at(text)
    if len(found) < 2 or found[-1][1].rstrip("/") not in targets.folders and found[-1][1] not in targets.folders:
        return None
    marker = _word_before(without_urls, found[-1][0])
    if marker in TO_WORDS or (marker in TO_WORDS_AFTER_FROM and any(_word_before(without_urls, at) in FROM_WORDS for at, _ in found[:-1])):
        return found[-1][1].rstrip("/") or found[-1][1]
    return None


def _paths_at(text: str) -> tuple[str, list[tuple[int, str]]]:
    """``text`` with its URLs blanked, and where each named path starts in it, with the path."""
    without_urls = _URL.sub(" ", text)
    found = [(m.start(1), _clean(m.group(1))) for m in _PATH.finditer(without_urls)]
    return without_urls, [(at, path) for at, path in found if path and path != "/"]


def _word_before(text: str, at: int, skipping: frozenset[str] = frozenset()) -> str:
    """The last word of ``text`` before ``at``, folded, passing over the words in ``skipping``."""
    words = _WORDS.findall(text[:at].casefold())
    while words and words[-1] in skipping:
        words.pop()
    return words[-1] if words else ""


# Between a preposition of destination and the file it names, articles and nouns of a file may stand
# ("in a new file ~/x.txt", "in un file ~/x.txt"): closed classes.
_ARTICLES = "a an the new un una uno il lo la nuovo nuova".split()
_BEFORE_FILE = frozenset([*_ARTICLES, "file", "document", "documento"])
# Verbs of making, English and Italian: with a file as their object ("make ~/x.txt say done", "make an
# index.txt"), they ask for the file to be written.
MAKING_VERBS = frozenset("make build generate prepare produce fai prepara genera produci".split())
_MADE = re.compile(
    r"\b(?:" + "|".join(sorted(MAKING_VERBS)) + r")\s+(?:(?:" + "|".join(_ARTICLES) + r")\s+)*"
    r"((?:~|\$HOME|\$WORKSPACE|\.{1,2})?/?[\w./-]*?[\w-]+\.[A-Za-z0-9]{1,8})(?![\w/])",
    re.IGNORECASE,
)


def destination_file(text: str) -> str | None:
    """The file ``text`` names as where something is written: its last named path, a file, after
    another named path or URL, with a preposition of destination before it, articles and the word
    "file" allowed between ("put the list of pdfs from ~/papers in a file ~/papers/index.txt",
    "the total of ~/a.csv into ~/total.txt"); or a file that a verb of making takes as its object
    ("make ~/plan.md say only: ready", "make a summary.rst in ~/drafts")."""
    made = _MADE.search(_URL.sub(" ", text))
    if made is not None and _EXTENSION.search(made.group(1)):
        return made.group(1)
    targets = named_targets(text)
    if not targets.files:
        return None
    without_urls, found = _paths_at(text)
    if not found or found[-1][1] not in targets.files or len(found) + len(targets.urls) < 2:
        return None
    marker = _word_before(without_urls, found[-1][0], _BEFORE_FILE)
    came_from = any(_word_before(without_urls, at, _BEFORE_FILE) in FROM_WORDS for at, _ in found[:-1]) or bool(targets.urls)
    # "to" is left out: "compare ~/a.txt to ~/b.txt" writes nothing.
    if marker in TO_WORDS - {"to"} or (marker in TO_WORDS_AFTER_FROM and came_from):
        return found[-1][1]
    return None


def without_named_targets(text: str) -> str:
    """``text`` with its named URLs, files and folders blanked out: what is left are the request's own words."""
    targets = named_targets(text)
    for target in (*targets.urls, *targets.files, *targets.folders):
        text = text.replace(target, " ")
    return text


def _clean(token: str) -> str:
    return token.rstrip(_TRAILING)


def named_targets(text: str) -> NamedTargets:
    """The files, folders and URLs ``text`` names, each once, in order."""
    urls = [_clean(m.group(0)) for m in _URL.finditer(text)]
    without_urls = _URL.sub(" ", text)
    files: list[str] = []
    folders: list[str] = []
    for m in _PATH.finditer(without_urls):
        path = _clean(m.group(1))
        if not path or path in ("/",):
            continue
        last = posixpath.basename(path.rstrip("/"))
        if path.endswith("/") or not _EXTENSION.search(last) or last.startswith(".") and last.count(".") == 1:
            folders.append(path.rstrip("/") or path)
        else:
            files.append(path)
    return NamedTargets(tuple(dict.fromkeys(files)), tuple(dict.fromkeys(folders)), tuple(dict.fromkeys(urls)))
