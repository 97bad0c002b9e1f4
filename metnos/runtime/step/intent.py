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
