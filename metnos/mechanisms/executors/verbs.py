"""Everyday verbs mapped into the closed vocabulary, for names that come from outside
(a skill's script, a model's specification)."""

from __future__ import annotations

from metnos.mechanisms.executors.manifest import VERB_CATEGORY

# Words that name an action outside the closed vocabulary of seeds/002 4-bis, and the verb of it they mean.
VERB_SYNONYMS = {
    "fetch": "get", "download": "get", "retrieve": "get", "query": "get", "load": "read", "open": "read",
    "search": "find", "lookup": "find", "locate": "find", "count": "compute", "calc": "compute",
    "calculate": "compute", "convert": "compute", "measure": "compute", "check": "compute", "validate": "compute",
    "make": "create", "new": "create", "add": "create", "generate": "create", "build": "create",
    "update": "change", "edit": "change", "modify": "change", "rename": "move", "remove": "delete", "rm": "delete",
    "post": "send", "notify": "send", "mail": "send", "save": "write", "put": "write", "upload": "share",
    "show": "render", "print": "render", "format": "render", "summarize": "describe", "summarise": "describe",
    "explain": "describe", "parse": "extract", "scrape": "extract", "zip": "compress", "archive": "compress",
    "categorize": "classify", "categorise": "classify", "tag": "classify", "diff": "compare",
    "exec": "run", "execute": "run",
}


def in_vocabulary(name: str) -> str:
    """``name`` with its first word replaced by the vocabulary verb it means, when it is a known synonym."""
    verb, sep, rest = name.partition("_")
    if verb not in VERB_CATEGORY and verb in VERB_SYNONYMS and sep:
        return f"{VERB_SYNONYMS[verb]}_{rest}"
    return name
