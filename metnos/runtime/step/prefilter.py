"""The pre-filter: rank the catalogue against the request, pick the pool.

seeds/002 ch. 5, read as follows where the text leaves room:

Scoring (bag of words). The request and each entry are tokenised with
:mod:`metnos.runtime.step.text`; stopwords never score. A request word found among
the entry's affinity tags scores 2 points; a request word found only in its
summary or descriptions (any language) scores 0.5, and at most 3 such words
count. This is the "affinity matches score 4x those on the description,
capped at 3 for description" of the spec, with the unit chosen so that the
worked example there (one affinity hit, ``fetch``, scores 2) comes out as
written. A word counts once per entry, at its best weight. Scores are kept
in half-point integer units internally so ties are exact.

Other forms. A request word no affinity tag has as written meets the tags
whose word it is in another form or with one slip of typing
(:mod:`metnos.runtime.step.wording`: a Snowball stem, English or Italian, an
Italian verb with its clitic pronoun, one letter missing, added, changed or
two swapped in a word of five letters or more): "newset" and "recente" score
for the tags "newest" and "recenti" as if written so, and the tag is the hit
recorded. The words of a named path or URL are names and meet only as
written, as in the description. On bench/shortlist_requests.jsonl this took
the shortlist's recall from 59% to 66% on the dev split and from 71% to 73%
on the held-out one (docs/benchmarks.md).

Order. Score descending, then executor name ascending: the result never
depends on the order the catalogue was given in.

Adaptive K. The confidence is read from the top two scores:
``high`` when the runner-up scores at most half the leader (or nothing),
``medium`` when the leader is strictly ahead, ``low`` on a tie at the top.
K is then ``k_high`` (3: the winner plus room for a two-step composition),
``max(k_high, ceil(pool/2))`` or the whole pool, never above the pool size
(METNOS_ENGINE_POOL_SIZE, default 12) and never including an entry that
scored nothing.

Affinity phrase recall. An affinity tag with at least two distinctive
words (not stopwords, not generic verbs) whose words all occur in the
request pulls its executor into the pool even if the ranking left it out,
best score first, at most 3 per query. These are *added* to the K ranked
ones ("3 additional tools" in the spec), so the pool can reach pool + 3.

Nothing matched. When no entry scores, a catalogue no larger than the pool
is passed whole (the LLM can still pick, e.g., a clock); a larger one yields
an empty pool, because an alphabetical slice of thousands of executors would
be noise dressed as a choice. ``confidence`` is ``none`` in both cases.

The index (:class:`PrefilterIndex`) is built once per catalogue and queried
per request; a query touches only the postings of the request's words.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metnos.runtime.step.asked import PERSON_WORDS, ActionWords
from metnos.runtime.step.errors import TurnError
from metnos.runtime.step.intent import without_named_targets
from metnos.runtime.step.text import STOPWORDS, content_tokens
from metnos.runtime.step.wording import Lexicon

AFFINITY_UNITS = 4  # 2 points, in half-point units
DESCRIPTION_UNITS = 1  # 0.5 points
DESCRIPTION_MATCH_CAP = 3
K_HIGH = 3
PHRASE_RECALL_CAP = 3

# Verbs so common in requests that a tag sharing only them with the request
# says nothing about cross-object intent. The closed executor vocabulary of
# seeds/002 ch. 4-bis plus everyday request verbs, English and Italian.
GENERIC_VERBS: frozenset[str] = frozenset(
    """
    read find list get filter sort group classify compute compare extract
    describe render move delete send share write set create change order
    compress have has make show tell give want need use see look check fetch
    open search know let run
    leggi leggere trova trovare cerca cercare elenca mostra mostrami dimmi
    dammi fai fare dai vedi usa avere volere voglio vorrei scrivi manda invia
    crea cambia sposta cancella calcola confronta estrai descrivi
    """.split()
)

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


class CatalogueError(TurnError):
    pass


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """What the pre-filter (and the shape FSM, caps and vaglio) need of one
    active executor. Build it from the loaded manifest.

    ``descriptions`` maps a language code to the description in that
    language; ``affinity`` holds the manifest's affinity tags, single words
    or multi-word phrases. ``vectorial`` executors get the tighter
    same-executor cap; ``side_effects`` and ``idempotent`` come from the
    manifest's ``[contract]`` and drive the vaglio's precautionary "ask";
    ``output_varies`` too, and tells the shortlist which of them may answer a question.
    """

    name: str
    version: str = "0.0.0"
    summary: str = ""
    descriptions: tuple[tuple[str, str], ...] = ()
    affinity: tuple[str, ...] = ()
    vectorial: bool = False
    side_effects: bool = False
    idempotent: bool = True
    # What its output depends on besides its arguments ("time", "world"; the manifest's
    # ``output_varies``): an executor with side effects that reads the world answers questions too.
    output_varies: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise CatalogueError(
                "bad_executor_name",
                f"executor name {self.name!r} is not lower snake_case verb_object",
                {"name": repr(self.name)},
            )
        descriptions = self.descriptions
        if isinstance(descriptions, Mapping):
            descriptions = tuple(sorted(descriptions.items()))
        else:
            descriptions = tuple(sorted(tuple(pair) for pair in descriptions))
        for pair in descriptions:
            if len(pair) != 2 or not all(isinstance(x, str) for x in pair):
                raise CatalogueError(
                    "bad_description",
                    f"{self.name}: descriptions must map language to text",
                    {"name": self.name},
                )
        object.__setattr__(self, "descriptions", descriptions)
        affinity = (self.affinity,) if isinstance(self.affinity, str) else tuple(self.affinity)
        if not all(isinstance(tag, str) for tag in affinity):
            raise CatalogueError(
                "bad_affinity", f"{self.name}: affinity tags must be strings", {"name": self.name}
            )
        object.__setattr__(self, "affinity", affinity)

    def description_text(self) -> str:
        return " ".join([self.summary, *(text for _, text in self.descriptions)])


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    version: str
    score: float
    affinity_hits: tuple[str, ...]
    description_hits: tuple[str, ...]
    via: str  # "rank" | "phrase_recall" | "fallback"
    phrase: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "score": self.score,
            "affinity_hits": list(self.affinity_hits),
            "description_hits": list(self.description_hits),
            "via": self.via,
            "phrase": self.phrase,
        }


@dataclass(frozen=True, slots=True)
class Ranking:
    """The pool handed to the LLM, in order, with why each one is there.
    ``to_json`` is the payload of the pre-filter event."""

    query_tokens: tuple[str, ...]
    catalogue_size: int
    pool_size: int
    matched: int
    confidence: str  # "high" | "medium" | "low" | "none"
    k: int
    top_score: float
    second_score: float
    candidates: tuple[Candidate, ...] = field(default_factory=tuple)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.candidates)

    def to_json(self) -> dict[str, Any]:
        return {
            "query_tokens": list(self.query_tokens),
            "catalogue_size": self.catalogue_size,
            "pool_size": self.pool_size,
            "matched": self.matched,
            "confidence": self.confidence,
            "k": self.k,
            "top_score": self.top_score,
            "second_score": self.second_score,
            "candidates": [c.to_json() for c in self.candidates],
        }


@dataclass(frozen=True, slots=True)
class _Phrase:
    entry: int
    tag: str
    words: frozenset[str]


class PrefilterIndex:
    """An inverted index over a catalogue. Immutable once built."""

    __slots__ = ("entries", "_aff", "_desc", "_aff_sets", "_desc_sets", "_phrases", "action_tags", "actions",
                 "_lexicon")

    def __init__(self, entries: Iterable[CatalogueEntry]) -> None:
        ordered = sorted(entries, key=lambda e: e.name)
        seen: set[str] = set()
        for entry in ordered:
            if not isinstance(entry, CatalogueEntry):
                raise CatalogueError(
                    "bad_entry", f"not a CatalogueEntry: {type(entry).__name__}", {}
                )
            if entry.name in seen:
                # Tool names must be unique in the LLM's tool list.
                raise CatalogueError(
                    "duplicate_executor",
                    f"executor {entry.name!r} appears twice in the catalogue",
                    {"name": entry.name},
                )
            seen.add(entry.name)
        self.entries: tuple[CatalogueEntry, ...] = tuple(ordered)
        aff: dict[str, list[int]] = {}
        desc: dict[str, list[int]] = {}
        aff_sets: list[frozenset[str]] = []
        desc_sets: list[frozenset[str]] = []
        phrases: dict[str, list[_Phrase]] = {}
        for i, entry in enumerate(self.entries):
            a = set()
            for tag in entry.affinity:
                words = content_tokens(tag)
                a |= words
                distinctive = frozenset(w for w in words if w not in GENERIC_VERBS)
                if len(distinctive) >= 2:
                    # A phrase can only match if all its words are in the
                    # request, so indexing it under one word is enough.
                    phrases.setdefault(min(distinctive), []).append(_Phrase(i, tag, distinctive))
            d = content_tokens(entry.description_text()) - a
            aff_sets.append(frozenset(a))
            desc_sets.append(frozenset(d))
            for w in a:
                aff.setdefault(w, []).append(i)
            for w in d:
                desc.setdefault(w, []).append(i)
        self._aff = aff
        self._desc = desc
        self._lexicon = Lexicon(aff)
        self.action_tags = _action_tags(self.entries)
        self.actions = ActionWords(self.action_tags, _media_words(self.entries), known=frozenset(aff) | frozenset(desc))
        self._aff_sets = tuple(aff_sets)
        self._desc_sets = tuple(desc_sets)
        self._phrases = phrases

    def __len__(self) -> int:
        return len(self.entries)

    def _forms(self, request_text: str, query: frozenset[str]) -> frozenset[str]:
        """The affinity words the request's other words stand for: a word no tag has as written is
        looked up in its other forms and with one slip of typing (:mod:`metnos.runtime.step.wording`).
        The words of a named path or URL are names, not words of the request, and meet only as written."""
        text = without_named_targets(request_text)
        found: set[str] = set()
        for word in content_tokens(text):
            if word in self._aff or word.isdigit():
                continue
            found |= self._lexicon.meets(word)
        return frozenset(found - query)

    def _candidate(self, i: int, query: frozenset[str], via: str, phrase: str | None = None, *,
                   meant: frozenset[str] | None = None) -> Candidate:
        entry = self.entries[i]
        aff_hits = tuple(sorted((query if meant is None else meant) & self._aff_sets[i]))
        desc_hits = tuple(sorted(query & self._desc_sets[i]))
        units = AFFINITY_UNITS * len(aff_hits) + DESCRIPTION_UNITS * min(
            len(desc_hits), DESCRIPTION_MATCH_CAP
        )
        return Candidate(entry.name, entry.version, units / 2, aff_hits, desc_hits, via, phrase)

    def query(self, request_text: str, *, pool_size: int, k_high: int = K_HIGH,
              phrase_recall_cap: int = PHRASE_RECALL_CAP) -> Ranking:
        if not isinstance(request_text, str):
            raise CatalogueError("bad_request", "the request must be text", {})
        for label, value in (("pool_size", pool_size), ("k_high", k_high)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CatalogueError("bad_parameter", f"{label} must be a positive integer", {label: repr(value)})
        if isinstance(phrase_recall_cap, bool) or not isinstance(phrase_recall_cap, int) or phrase_recall_cap < 0:
            raise CatalogueError("bad_parameter", "phrase_recall_cap must be >= 0", {})
        query = frozenset(content_tokens(request_text))
        meant = query | self._forms(request_text, query)
        aff_counts: Counter[int] = Counter()
        desc_counts: Counter[int] = Counter()
        for word in meant:
            postings = self._aff.get(word)
            if postings:
                aff_counts.update(postings)
        for word in query:
            postings = self._desc.get(word)
            if postings:
                desc_counts.update(postings)
        units: dict[int, int] = {i: AFFINITY_UNITS * c for i, c in aff_counts.items()}
        for i, c in desc_counts.items():
            units[i] = units.get(i, 0) + DESCRIPTION_UNITS * min(c, DESCRIPTION_MATCH_CAP)

        # (-units, index) orders by score then name, since entries are by name.
        need = min(pool_size, len(units))
        top = heapq.nsmallest(max(need, 2), ((-u, i) for i, u in units.items()))
        top_units = -top[0][0] if top else 0
        second_units = -top[1][0] if len(top) > 1 else 0

        candidates: list[Candidate] = []
        if not units:
            confidence = "none"
            k = len(self.entries) if len(self.entries) <= pool_size else 0
            candidates = [self._candidate(i, query, "fallback", meant=meant) for i in range(k)]
        else:
            if second_units == 0 or top_units >= 2 * second_units:
                confidence, k = "high", min(pool_size, k_high)
            elif top_units > second_units:
                confidence, k = "medium", min(pool_size, max(k_high, math.ceil(pool_size / 2)))
            else:
                confidence, k = "low", pool_size
            k = min(k, len(units))
            candidates = [self._candidate(i, query, "rank", meant=meant) for _, i in top[:k]]
            chosen = {i for _, i in top[:k]}
            candidates.extend(self._recall(query, meant, chosen, units, phrase_recall_cap))
        return Ranking(
            query_tokens=tuple(sorted(query)),
            catalogue_size=len(self.entries),
            pool_size=pool_size,
            matched=len(units),
            confidence=confidence,
            k=k,
            top_score=top_units / 2,
            second_score=second_units / 2,
            candidates=tuple(candidates),
        )

    def _recall(self, query: frozenset[str], meant: frozenset[str], chosen: set[int], units: Mapping[int, int],
                cap: int) -> list[Candidate]:
        if cap == 0:
            return []
        hits: dict[int, str] = {}
        for word in meant:
            for phrase in self._phrases.get(word, ()):
                if phrase.entry in chosen or not phrase.words <= meant:
                    continue
                # Several tags of one executor may match: keep the first in
                # manifest order, so the recorded reason is stable.
                best = hits.get(phrase.entry)
                tags = self.entries[phrase.entry].affinity
                if best is None or tags.index(phrase.tag) < tags.index(best):
                    hits[phrase.entry] = phrase.tag
        order = sorted(hits, key=lambda i: (-units.get(i, 0), i))[:cap]
        return [self._candidate(i, query, "phrase_recall", hits[i], meant=meant) for i in order]


_QUOTED = re.compile(r'"[^"]*"|\u201c[^\u201d]*\u201d')


def _action_tags(entries: Sequence[CatalogueEntry]) -> dict[str, tuple[frozenset[str], ...]]:
    """For each executor with side effects, the tags that name its action: each
    one a set of words that must all be in a request. A one-word tag counts
    only if no executor without side effects has that word (in any form,
    :mod:`metnos.runtime.step.wording`) among its tags ("files" names what
    delete_files works on, not that the user wants anything deleted); a
    multi-word tag counts whole ("every monday"). The verb of the executor's
    name counts like a one-word tag, and so does a word of its one-line
    summary that its long description repeats and that no executor without
    side effects uses anywhere: the summary says what it does ("Write text to
    files: create new ones, overwrite or append"), the description confirms
    which words are its operations ("'overwrite' replaces it") and which are
    filler ("new"). What the summary quotes is an example of the data ("friday
    10:00"), not an operation, and does not count."""
    tagged = _reader_words(entries)
    described: set[str] = set()
    for entry in entries:
        if not entry.side_effects:
            described |= content_tokens(entry.description_text())
    by_tags, anywhere = Lexicon(tagged), Lexicon(tagged | described)
    found: dict[str, tuple[frozenset[str], ...]] = {}
    for entry in entries:
        if not entry.side_effects:
            continue
        own = content_tokens(" ".join(text for _, text in entry.descriptions if text != entry.summary))
        said = _QUOTED.sub(" ", entry.summary)
        summary = [w for w in sorted(content_tokens(said) & own) if not anywhere.meets(w, typos=False)]
        tags: list[frozenset[str]] = []
        for tag in (*entry.affinity, entry.name.split("_", 1)[0], *summary):
            words = frozenset(content_tokens(tag))
            if len(words) > 1 or (words and not any(by_tags.meets(w, typos=False) for w in words)):
                if words not in tags:
                    tags.append(words)
        found[entry.name] = tuple(tags)
    return found


def _reader_words(entries: Sequence[CatalogueEntry]) -> set[str]:
    """The words of the names and tags of the executors without side effects."""
    words: set[str] = set()
    for entry in entries:
        if not entry.side_effects:
            words |= set(entry.name.split("_"))
            for tag in entry.affinity:
                words |= content_tokens(tag)
    return words


def _media_words(entries: Sequence[CatalogueEntry]) -> frozenset[str]:
    """The verbs of the person tags of executors with side effects ("message someone") that are
    also a tag of an executor without them ("message": what read_messages reads): a verb that
    names the medium, so that "message me" asks for a message and not a reply."""
    read = Lexicon(_reader_words(entries))
    found: set[str] = set()
    for entry in entries:
        if entry.side_effects:
            for tag in entry.affinity:
                words = content_tokens(tag)
                if words & PERSON_WORDS:
                    found |= {w for w in words - PERSON_WORDS if read.meets(w, typos=False)}
    return frozenset(found)


def prefilter(request_text: str, entries: PrefilterIndex | Sequence[CatalogueEntry], *,
              pool_size: int, k_high: int = K_HIGH,
              phrase_recall_cap: int = PHRASE_RECALL_CAP) -> Ranking:
    """Rank ``entries`` against ``request_text``. Pass a :class:`PrefilterIndex`
    to reuse the index across turns; a plain sequence is indexed on the fly."""
    index = entries if isinstance(entries, PrefilterIndex) else PrefilterIndex(entries)
    return index.query(request_text, pool_size=pool_size, k_high=k_high,
                       phrase_recall_cap=phrase_recall_cap)


__all__ = [
    "AFFINITY_UNITS",
    "DESCRIPTION_MATCH_CAP",
    "DESCRIPTION_UNITS",
    "GENERIC_VERBS",
    "STOPWORDS",
    "Candidate",
    "CatalogueEntry",
    "CatalogueError",
    "PrefilterIndex",
    "Ranking",
    "prefilter",
]
