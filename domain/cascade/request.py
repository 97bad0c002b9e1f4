"""What a request is, for the cascade: its normal form, its slots, its intent.

Two requests with the same normal form are the same request (L0's exact key).
Slots are the values a request carries (paths, urls, quoted text, dates,
numbers, names), found by rules; the request with its slots replaced by their
types is its intent (L1's key): "count the lines of a.txt" and "count the
lines of b.txt" share one.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import blake3

# Order matters: an url holds a path, a date holds numbers.
_SLOT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("url", re.compile(r"https?://[^\s\"'<>]+")),
    ("quoted", re.compile(r"\"[^\"\n]+\"|'[^'\n]+'|«[^»\n]+»")),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("path", re.compile(r"(?:~|\.{1,2})?/[\w.~/\-]*[\w~/]|~[\w.\-]*|\b[\w\-]+(?:\.[A-Za-z0-9]{1,6})+\b")),
    ("number", re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")),
    ("name", re.compile(r"(?<=[a-z,;:] )[A-Z][a-z]+(?:[ -][A-Z][a-z]+)*\b")),
)


@dataclass(frozen=True)
class Slot:
    kind: str
    value: str
    start: int
    end: int

    def to_json(self) -> list[str]:
        return [self.kind, self.value]


def normalise(text: str) -> str:
    """Case, spacing and closing punctuation do not make another request."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"\s+", " ", folded).strip().rstrip("?!.。 ")


def request_key(text: str) -> str:
    return blake3.blake3(normalise(text).encode()).hexdigest()[:32]


def slots_of(text: str) -> list[Slot]:
    """The slot values of a request, left to right; a span is taken by the first rule that claims it."""
    text = unicodedata.normalize("NFKC", text)
    taken: list[Slot] = []
    for kind, rule in _SLOT_RULES:
        for match in rule.finditer(text):
            start, end = match.span()
            if any(start < s.end and s.start < end for s in taken):
                continue
            value = match.group(0)
            if kind == "quoted":
                value = value[1:-1]
            taken.append(Slot(kind, value, start, end))
    return sorted(taken, key=lambda s: s.start)


def intent_of(text: str) -> tuple[str, list[Slot]]:
    """The request with each slot replaced by its type, normalised; and the slots."""
    text = unicodedata.normalize("NFKC", text)
    slots = slots_of(text)
    parts: list[str] = []
    at = 0
    for slot in slots:
        parts.append(text[at:slot.start])
        parts.append(f"<{slot.kind}>")
        at = slot.end
    parts.append(text[at:])
    return normalise("".join(parts)), slots


def intent_key(text: str) -> str:
    return blake3.blake3(intent_of(text)[0].encode()).hexdigest()[:32]


# Words a rewording may add, drop or swap without changing what is asked:
# politeness, pronouns, question forms, verbs that only ask to be told. Any
# other word that differs makes another request, however close the vectors
# ("the first item" and "the last item" are 0.97 apart in WordLlama,
# "delete my todo list" is 0.89 from "read my todo list").
_PARAPHRASE_WORDS = frozenset("""
    please kindly could would can will you me my i i'm we us our your it its this that these those there here
    the a an of in on at to from for by with and then also just now
    what what's which who whom whose where when how is are was were be been do does did have has had get got
    tell show give display say let know see read out thanks thank hey hi ok okay
""".split())


def _stem(word: str) -> str:
    word = word.removesuffix("'s")
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> frozenset[str]:
    """The words of a request that carry what it asks (slot values included)."""
    words = re.findall(r"[\w'.~/:-]+", normalise(text))
    return frozenset(_stem(w.strip(".:")) for w in words if w.strip(".:") and w.strip(".:") not in _PARAPHRASE_WORDS)


def differing_words(a: str, b: str) -> frozenset[str]:
    """The content words one request has and the other lacks."""
    return content_words(a) ^ content_words(b)
