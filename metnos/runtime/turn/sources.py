"""The reads a turn opens with: what the request names as its data, fetched before the model is asked.

A small model given a request that names a file ("the total of the amount
column in ~/receipts/x.csv") often calls the wrong tool first, or a tool that
needs data it does not have yet. The request itself says where the data is,
so the turn reads it first, as steps of its own (checked, judged and recorded
like any other), and the model starts from the content: its first choice is
then to answer, or to take the next step on that data.

Rules, no model (seeds/002 ch. 4-ter's data sources, read from the request
by :mod:`metnos.runtime.step.intent`):

* a named text file is read with read_files; a named folder is listed with
  find_files (with the file pattern the request names, ``.tmp`` or "PDF");
  a named URL is fetched with get_urls, as text;
* a path right after "to" or "into" is where something goes, not a source:
  it is not read ("move ... into ~/Pictures", "save ... to ~/notes/x.md");
* a file whose extension is not text (an installer, a photo) is not read;
* at most :data:`MAX_OPENING_READS` reads, in the order the request names them.

A read that fails (the file does not exist yet) is not the turn's problem:
the loop records it and leaves it out of what the model sees.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from metnos.runtime.step.intent import named_targets

MAX_OPENING_READS = 3

TEXT_EXTENSIONS = frozenset({
    "txt", "md", "markdown", "csv", "tsv", "json", "jsonl", "ndjson", "log", "toml", "yaml", "yml", "ini", "cfg",
    "conf", "xml", "html", "htm", "rst", "org", "py", "js", "ts", "sh", "sql", "env", "list", "todo",
})

# Words a request uses for a kind of file, and the pattern find_files takes for it.
_TYPE_WORDS = {"pdf": "*.pdf", "pdfs": "*.pdf", "markdown": "*.md", "csv": "*.csv", "jpg": "*.jpg", "jpeg": "*.jpeg",
               "png": "*.png", "mp3": "*.mp3", "txt": "*.txt"}
_EXTENSION_WORD = re.compile(r"(?<![\w/~.$])\.([a-z0-9]{1,6})\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")
_DESTINATION_WORDS = frozenset({"to", "into", "onto"})


@dataclass(frozen=True)
class OpeningRead:
    executor: str
    args: dict[str, Any]
    target: str

    def to_json(self) -> dict[str, Any]:
        return {"executor": self.executor, "args": self.args, "target": self.target}


def opening_reads(request_text: str, available: Collection[str]) -> list[OpeningRead]:
    """The reads that bring the data ``request_text`` names, with executors from ``available``."""
    named = named_targets(request_text)
    pattern = file_pattern(request_text)
    reads: list[OpeningRead] = []
    for url in named.urls:
        if "get_urls" in available:
            reads.append(OpeningRead("get_urls", {"urls": [url], "as_text": not url.lower().endswith(".json")}, url))
    for path in named.files:
        if "read_files" in available and _extension(path) in TEXT_EXTENSIONS and not _is_destination(request_text, path):
            reads.append(OpeningRead("read_files", {"paths": [path]}, path))
    for path in named.folders:
        if "find_files" in available and not _is_destination(request_text, path):
            args: dict[str, Any] = {"base_path": path}
            if pattern is not None:
                args["pattern"] = pattern
            reads.append(OpeningRead("find_files", args, path))
    ordered = sorted(reads, key=lambda r: request_text.find(r.target))
    return ordered[:MAX_OPENING_READS]


def file_pattern(request_text: str) -> str | None:
    """The one kind of file the request asks about (``.tmp`` files, "the PDF files"), as a glob; None if none or several."""
    without_paths = request_text
    for target in (*named_targets(request_text).files, *named_targets(request_text).folders):
        without_paths = without_paths.replace(target, " ")
    found = {f"*.{m.group(1).lower()}" for m in _EXTENSION_WORD.finditer(without_paths)}
    words = _WORD.findall(without_paths.casefold())
    found |= {_TYPE_WORDS[w] for w in words if w in _TYPE_WORDS}
    return found.pop() if len(found) == 1 else None


def _extension(path: str) -> str:
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return last.rsplit(".", 1)[-1].lower() if "." in last else ""


def _is_destination(request_text: str, target: str) -> bool:
    at = request_text.find(target)
    before = _WORD.findall(request_text[:at].casefold()) if at >= 0 else []
    return bool(before) and before[-1] in _DESTINATION_WORDS
