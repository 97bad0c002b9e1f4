"""What a request says of the names of the files an action takes, and the files whose names do not meet it.

"Delete the files in ~/scans whose name starts with draft_", "move the reports whose names end in
_old", "sposta i file con bozza nel nome": the request holds the action to the files whose names
meet a condition. A model that lists a folder and moves everything it found takes files the request
left out, and a move or a delete is not undone by an answer: the sources are held to the condition
before the step runs, as they are to a kind of file (metnos/runtime/turn/kinds.py).

Read from the form of the request alone (en, it): a name, or files, that start, end or contain a text
written right after those words, quoted or not. "Files that start with a header" speaks of their
content: a lone article is no part of a name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from metnos.runtime.turn.kinds import sources

STARTS, ENDS, CONTAINS = "starts", "ends", "contains"

# A text written after the words: in quotes, or up to a space or a sentence's punctuation.
_VALUE = r"""(?:["'“‘«](?P<quoted>[^"'”’»]+)["'”’»]|(?P<bare>[^\s"'“”‘’«»,;:!?()]+))"""
_SUBJECT = r"(?:names?|files?|nome|nomi|file)\s+(?:that\s+|which\s+|che\s+)?"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (how, re.compile(pattern.format(v=_VALUE, s=_SUBJECT), re.IGNORECASE)) for how, pattern in (
        (STARTS, r"\b{s}(?:starts?|begins?|starting|beginning)\s+with\s+{v}"),
        (STARTS, r"\b{s}(?:inizia|iniziano|comincia|cominciano)\s+(?:con|per)\s+{v}"),
        (ENDS, r"\b{s}(?:ends?|ending)\s+(?:with|in)\s+{v}"),
        (ENDS, r"\b{s}(?:finisce|finiscono|termina|terminano)\s+(?:con|in|per)\s+{v}"),
        (CONTAINS, r"\bnames?\s+(?:that\s+|which\s+)?(?:contains?|containing|includes?|including)\s+{v}"),
        (CONTAINS, r"\bwith\s+{v}\s+in\s+(?:their|its|the)\s+names?\b"),
        (CONTAINS, r"\b(?:nome|nomi)\s+(?:che\s+)?(?:contiene|contengono)\s+{v}"),
        (CONTAINS, r"\bcon\s+{v}\s+nel\s+nome\b"),
    ))
# Words that begin a phrase about what a file holds, not a part of its name.
_NOT_A_NAME = frozenset("a an the one some any un una uno il lo la le gli i".split())


@dataclass(frozen=True)
class NameCondition:
    how: str
    text: str

    def met_by(self, path: str) -> bool:
        name = path.rstrip("/").rsplit("/", 1)[-1].casefold()
        text = self.text.casefold()
        if self.how == STARTS:
            return name.startswith(text)
        if self.how == ENDS:
            return name.endswith(text)
        return text in name

    def words(self) -> str:
        return f"whose name {'contains' if self.how == CONTAINS else self.how + ' with'} {self.text}"


def name_conditions(request: str) -> tuple[NameCondition, ...]:
    """The conditions the request puts on the names of the files it speaks of; none when it puts none."""
    found: list[NameCondition] = []
    for how, pattern in _PATTERNS:
        for m in pattern.finditer(request):
            text = m.group("quoted") or m.group("bare").rstrip(".")
            if text and text.casefold() not in _NOT_A_NAME and NameCondition(how, text) not in found:
                found.append(NameCondition(how, text))
    return tuple(found)


def outside_names(request: str, args: Mapping[str, Any]) -> tuple[tuple[NameCondition, ...], list[str]]:
    """The request's name conditions and the sources of ``args`` whose names miss one of them."""
    conditions = name_conditions(request)
    if not conditions:
        return conditions, []
    return conditions, [p for p in sources(args) if not all(c.met_by(p) for c in conditions)]
