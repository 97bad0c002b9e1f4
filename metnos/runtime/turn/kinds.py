"""The kind of file a request names, and the files an action would take that are not of it.

"Move every .txt file into ~/old", "delete the PDFs": the request names the kind of the
files the action takes. The 1.5B moved a folder's .md and .png files along with the .txt
and .pdf ones and answered that it had moved what was asked. A move or a delete is not
undone by an answer, so the sources are held to the kind before the step runs.

Read from the form of the request alone: an extension written as such (".txt", "*.pdf"),
a format named as files ("PDF files", "the JPGs"), or a kind of file everyone names
(photos, videos, songs). Extensions inside a path the request writes (~/notes/a.txt)
name that file, not a kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# Formats people name as files ("PDF files", "the CSVs"): the extensions each one means.
FORMATS: dict[str, frozenset[str]] = {
    "pdf": frozenset({"pdf"}), "txt": frozenset({"txt"}), "csv": frozenset({"csv"}), "json": frozenset({"json"}),
    "jpg": frozenset({"jpg", "jpeg"}), "jpeg": frozenset({"jpg", "jpeg"}), "png": frozenset({"png"}),
    "gif": frozenset({"gif"}), "heic": frozenset({"heic"}), "mp3": frozenset({"mp3"}), "mp4": frozenset({"mp4"}),
    "mkv": frozenset({"mkv"}), "mov": frozenset({"mov"}), "wav": frozenset({"wav"}), "flac": frozenset({"flac"}),
    "docx": frozenset({"docx", "doc"}), "xlsx": frozenset({"xlsx", "xls"}), "pptx": frozenset({"pptx", "ppt"}),
    "zip": frozenset({"zip"}), "iso": frozenset({"iso"}), "tmp": frozenset({"tmp"}), "log": frozenset({"log"}),
    "markdown": frozenset({"md", "markdown"}), "html": frozenset({"html", "htm"}), "ics": frozenset({"ics"}),
    "vcf": frozenset({"vcf"}),
}
_IMAGES = frozenset({"jpg", "jpeg", "png", "gif", "heic", "heif", "webp", "tif", "tiff", "bmp", "raw", "dng", "cr2", "nef"})
_VIDEOS = frozenset({"mp4", "mkv", "mov", "avi", "webm", "m4v", "wmv"})
_AUDIO = frozenset({"mp3", "flac", "wav", "ogg", "m4a", "aac", "opus"})
# Kinds of file named by what they are (en, it).
KINDS: dict[str, frozenset[str]] = {
    "photo": _IMAGES, "photos": _IMAGES, "picture": _IMAGES, "pictures": _IMAGES, "image": _IMAGES, "images": _IMAGES,
    "foto": _IMAGES, "immagine": _IMAGES, "immagini": _IMAGES,
    "video": _VIDEOS, "videos": _VIDEOS, "filmato": _VIDEOS, "filmati": _VIDEOS,
    "song": _AUDIO, "songs": _AUDIO, "canzone": _AUDIO, "canzoni": _AUDIO,
}

# A path the request writes: its extension names that one file.
_PATH = re.compile(r"(?:~|\.{1,2})?/\S+|\S+/\S*")
# ".txt", "*.pdf", "'.jpg'": an extension written as such.
_EXTENSION = re.compile(r"(?<![\w/])\*?\.([A-Za-z0-9]{1,5})\b")
# "PDF files", "markdown files", "file PDF", "the JPGs", "i PDF".
_FORMAT_WORD = "|".join(sorted(FORMATS, key=len, reverse=True))
_NAMED_FORMAT = re.compile(rf"\b(?P<a>{_FORMAT_WORD})\s+(?:files?|documents?|documenti)\b|\bfile\s+(?P<b>{_FORMAT_WORD})\b"
                           rf"|\b(?P<c>pdf|jpg|jpeg|png|csv|mp3|mp4|iso|zip|docx|xlsx)s\b", re.IGNORECASE)
_KIND_WORD = re.compile(r"\b(" + "|".join(sorted(KINDS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def kinds_named(request: str) -> frozenset[str]:
    """The extensions the files the request speaks of may have; empty when it names no kind."""
    words = _PATH.sub(" ", request)
    found: set[str] = set()
    for m in _EXTENSION.finditer(words):
        ext = m.group(1).casefold()
        found |= FORMATS.get(ext, frozenset({ext}))
    for m in _NAMED_FORMAT.finditer(words):
        found |= FORMATS[(m.group("a") or m.group("b") or m.group("c")).casefold()]
    for m in _KIND_WORD.finditer(words):
        found |= KINDS[m.group(1).casefold()]
    return frozenset(found)


def extension(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].casefold() if "." in name.lstrip(".") else ""


def sources(args: Mapping[str, Any]) -> list[str]:
    """The existing files an action takes as its object: its ``paths``, its ``entries``' paths
    and the ``src`` of its moves (never a destination)."""
    found: list[str] = [p for p in _strings(args.get("paths"))]
    found += [e["path"] for e in args.get("entries") or [] if isinstance(e, Mapping) and isinstance(e.get("path"), str)]
    found += [m["src"] for m in args.get("moves") or [] if isinstance(m, Mapping) and isinstance(m.get("src"), str)]
    return found


def outside_kind(request: str, args: Mapping[str, Any]) -> tuple[frozenset[str], list[str]]:
    """The kinds the request names and the sources that are not of them (none when it names no kind)."""
    kinds = kinds_named(request)
    if not kinds:
        return kinds, []
    return kinds, [p for p in sources(args) if extension(p) not in kinds]


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        yield from (v for v in value if isinstance(v, str))
