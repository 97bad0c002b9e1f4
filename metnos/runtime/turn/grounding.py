"""Is the answer true to what the turn saw? The check a turn passes before it is
``answered`` (docs/turns.md, "Grounded answers").

An answer makes claims a reader can check: numbers, paths and file names,
quoted text, the items of a list, the lines it copies out of a file. Each one
must be found in what the turn's steps returned (their observations, the
figures they computed, their metadata), or in the request itself. Whatever is
found nowhere is *unmatched*: the answer gets one repair round naming it, and a
turn whose answer still holds such parts ends ``unverified``, never
``answered``.

An *exact ask* (the last three lines, the first two items, the five largest)
is held to more: what the answer gives must come from a step that worked the
data out (a slice, a sort, a count), and give as many as were asked for.
Counting or slicing in the model's prose is where the small models went wrong
("the last three lines" answered with all five).

Everything here is read from the form of the text alone, never from known
requests or answers; it is pure, so replay checks an answer the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from domain import provenance as prov
from metnos.runtime.step.intent import named_targets
from metnos.runtime.step.records import RecordsError, file_rows, is_file_list
from metnos.runtime.step.text import content_tokens
from metnos.runtime.turn.composing import textual
from metnos.settings import i18n

# Past this many unmatched parts, the rest are counted rather than named.
MAX_NAMED = 8

_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
# A number as an answer writes it: not inside a word, a path or an identifier.
_ANSWER_NUMBER = re.compile(r"(?<![\w./~\\-])-?\d+(?:[.,]\d+)*(?![\w/\\])")
_PATHLIKE = re.compile(r"(?<![\w@])(?:~|\.{1,2})?/?(?:[\w.\-]+/)*[\w\-]+\.[A-Za-z][\w]{0,7}(?![\w/])"
                       r"|(?<![\w@])(?:~|\.{1,2})?/(?:[\w.\-]+/?)+")
_URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+")
_STEP_NUMBER = re.compile(r"\b(?:steps?|passo|passi)\s*$", re.IGNORECASE)
# A machine's name written in an answer ("from_location", "max_results"): a field, a key or a file's stem,
# which only the data, the request or the names the turn's tools go by can give. The 0.5B answered
# "from_location: town" to where the user is, with no step run.
_IDENTIFIER = re.compile(r"(?<![\w./~\\-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w/\\-])")
# A name an answer gives: a capitalised word (not all capitals, not a stopword) that opens no sentence or line.
_WORD_TOKEN = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
_OPENS = re.compile(r"(?:^|[.!?]|\n)[\s\"'“«(*_`#>•-]*(?:\d{1,3}[.)]\s*)?$")
_QUOTED = re.compile(r"\"([^\"\n]{2,})\"|“([^”\n]{2,})”|«([^»\n]{2,})»|`([^`\n]{2,})`")
_FENCE = re.compile(r"```[^\n]*\n(?P<body>.*?)```", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+(?P<item>.+?)\s*$")
_MARKUP = re.compile(r"\*\*|__|`")
# Where an item's head ends: "notes.md: 120 bytes", "Alice - 3 mails", "a.txt (2 KB)".
_HEAD_END = re.compile(r"\s*(?::\s|\s[-–—]\s|\s\(|,\s)")
_WS = re.compile(r"\s+")
# A date or a time in a result: 2026-11-28, 2026-11-28T04:17:33+00:00, 04:17, 4:17:33.
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?|\b\d{1,2}:\d{2}(?::\d{2})?\b")
# Words around a number in an answer that say it is part of a date or a time.
_TIME_WORDS = re.compile(r"\d\s*:\s*\d|\d{4}-\d|\b(?:am|pm|a\.m|p\.m|o'clock|h|ore|jan\w*|feb\w*|mar\w*|apr\w*|may|jun\w*|"
                         r"jul\w*|aug\w*|sep\w*|oct\w*|nov\w*|dec\w*|gen\w*|febbraio|marzo|aprile|maggio|giugno|luglio|"
                         r"agosto|settembre|ottobre|novembre|dicembre|mon\w*|tue\w*|wed\w*|thu\w*|fri\w*|sat\w*|sun\w*|"
                         r"luned\w*|marted\w*|mercoled\w*|gioved\w*|venerd\w*|sabato|domenica|today|oggi|time|date|ora|data)\b",
                         re.IGNORECASE)


@dataclass(frozen=True)
class ExactAsk:
    """What the request asks to be worked out exactly: ``count`` of ``what``
    from the ``end`` (first/last/largest...), ``count`` None when the request
    gives no number ("the last line" is one, "the end of the file" none)."""

    what: str  # "lines" | "items"
    end: str  # "first" | "last" | "top"
    count: int | None

    def words(self) -> str:
        counted = "" if self.count is None else ".count"
        return i18n.english(f"turn.exact.{self.end}.{self.what}{counted}", count=self.count)


@dataclass(frozen=True)
class Grounding:
    unmatched: tuple[str, ...] = ()
    # Why an exact ask was not met (empty when it was, or when there was none).
    exactness: str = ""
    # What the answer says is missing or unreadable although a step read it.
    denied: tuple[str, ...] = ()
    # Why an answer that names nothing to check cannot stand (empty when it can).
    bare: str = ""

    @property
    def holds(self) -> bool:
        return not self.unmatched and not self.exactness and not self.denied and not self.bare

    def problems(self) -> list[str]:
        named = ", ".join(f"{part!r}" for part in self.unmatched[:MAX_NAMED])
        more = len(self.unmatched) - MAX_NAMED
        out = []
        if named:
            out.append(i18n.english("turn.grounding.not_found_more" if more > 0 else "turn.grounding.not_found", parts=named, more=more))
        if self.exactness:
            out.append(self.exactness)
        if self.denied:
            out.append(i18n.english("turn.grounding.denied", said=", ".join(repr(d) for d in self.denied[:MAX_NAMED])))
        if self.bare:
            out.append(self.bare)
        return out

    def summary(self) -> str:
        return "; ".join(self.problems())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"unmatched": list(self.unmatched), "exactness": self.exactness}
        if self.denied:
            out["denied"] = list(self.denied)
        if self.bare:
            out["bare"] = self.bare
        return out


@dataclass(frozen=True)
class StepData:
    """One good step's result as the check sees it: whether a step worked it out
    (a slice, a sort, a count: anything but a plain read) and the observation."""

    executor: str
    computed: bool
    observation: Mapping[str, Any]
    # What the output holds (domain/provenance.py: LOCAL for the clock), "" when not traced.
    source: str = ""
    # Its list, or the list it was worked out of, stops where a limit cut it (:func:`cut_short`): its end
    # or its top need not be the whole's.
    partial: bool = False


def listing_cut(observation: Any) -> bool:
    """Whether a listing stops where its limit did (``metadata.truncated``: find_files' ``max_results``)."""
    meta = observation.get("metadata") if isinstance(observation, Mapping) else None
    return isinstance(meta, Mapping) and meta.get("truncated") is True


def cut_short(observation: Any) -> bool:
    """Whether a step's data stops where a limit cut it, not where the data ends: a listing
    (:func:`listing_cut`), a read's ``truncated``, an entry's."""
    if not isinstance(observation, Mapping):
        return False
    entries = observation.get("entries")
    return (listing_cut(observation) or observation.get("truncated") is True
            or (isinstance(entries, list) and any(isinstance(e, Mapping) and e.get("truncated") is True for e in entries)))


# --- the request ----------------------------------------------------------------

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "a": 1, "an": 1,
    "uno": 1, "una": 1, "un": 1, "due": 2, "tre": 3, "quattro": 4, "cinque": 5, "sei": 6, "sette": 7, "otto": 8,
    "nove": 9, "dieci": 10,
}
_COUNT = r"(?P<count>\d{1,4}|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")"
_LAST = r"(?P<end>last|final|closing|bottom|ultim[aei]|finali?)"
_FIRST = r"(?P<end>first|opening|top|initial|prim[aei]|iniziali?)"
_LINES = r"(?P<what>lines?|rows?|righe|riga|linee?)"
_ITEMS = r"(?P<what>items?|entries|entry|files?|results?|elementi|elemento|voci|voce)"
# English: "the last three lines", "the final 3 lines", "first line"; Italian: "le ultime tre righe", "le 3 righe finali".
_ASKS = [
    re.compile(rf"\b{end}\s+(?:{_COUNT}\s+)?{what}\b", re.IGNORECASE)
    for end in (_LAST, _FIRST) for what in (_LINES, _ITEMS)
] + [
    re.compile(rf"\b{_COUNT}\s+{what}\s+{end}\b", re.IGNORECASE)
    for end in (_LAST, _FIRST) for what in (_LINES, _ITEMS)
] + [
    re.compile(rf"\b{_COUNT}\s+{end}\s+{what}\b", re.IGNORECASE)
    for end in (_LAST, _FIRST) for what in (_LINES, _ITEMS)
]
# "the 3 largest files", "the two newest notes": the top K by a field, worked out by a sort.
_RANKED = re.compile(rf"\b{_COUNT}\s+(?P<end>largest|biggest|smallest|newest|oldest|latest|most recent|heaviest|lightest"
                     r"|highest|lowest|più grandi|più piccoli|più recenti|più vecchi)\b", re.IGNORECASE)
# "the end of the file", "how the file ends": the last lines, how many unsaid.
_END_OF_FILE = re.compile(r"\b(?:end of (?:the |this |that )?(?:file|text|document|note)|how (?:the |it )\w* ?ends"
                          r"|fine del (?:file|testo|documento))\b", re.IGNORECASE)


def exact_ask(request: str) -> ExactAsk | None:
    """The exact ask the request makes, if any, read from its form."""
    for pattern in _ASKS:
        m = pattern.search(request)
        if m is None:
            continue
        raw = (m.group("count") or "").casefold()
        count = int(raw) if raw.isdigit() else _NUMBER_WORDS.get(raw)
        what = "lines" if re.match(r"lin|row|rig", m.group("what"), re.IGNORECASE) else "items"
        end_word = m.group("end").casefold()
        end = "last" if re.match(r"last|final|closing|bottom|ultim|final", end_word) else "first"
        if count is None and not re.search(r"s\b|righe|linee|voci|elementi|entries", m.group("what"), re.IGNORECASE):
            count = 1  # "the last line": one
        return ExactAsk(what, end, count)
    ranked = _RANKED.search(request)
    if ranked is not None:
        raw = ranked.group("count").casefold()
        count = int(raw) if raw.isdigit() else _NUMBER_WORDS.get(raw)
        if count is not None and raw not in ("a", "an", "un", "una", "uno"):
            return ExactAsk("items", "top", count)
    if _END_OF_FILE.search(request):
        return ExactAsk("lines", "last", None)
    if superlative_order(request) is not None:
        # "the largest file", "which item has the highest amount": the top one, worked out by a sort
        # (the 1.5B named the first file it listed, and the last line of a CSV, as "the largest").
        return ExactAsk("items", "top", 1)
    return None


# --- what the steps returned --------------------------------------------------------

def leaves(value: Any) -> Iterable[str]:
    """The values of an observation as text, without its keys."""
    if isinstance(value, Mapping):
        for v in value.values():
            yield from leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def _field_names(value: Any) -> Iterable[str]:
    """The keys of an observation's records: a composed answer that sets a record out as JSON
    quotes them ("uid", "summary"), and a key is what the step returned as much as its value."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from _field_names(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _field_names(v)


def _lengths(value: Any) -> Iterable[int]:
    """The length of every list in an observation: a count the step made."""
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _lengths(v)
    elif isinstance(value, (list, tuple)):
        yield len(value)
        for v in value:
            yield from _lengths(v)


def _number(raw: str) -> float | None:
    plain = raw.replace(",", "") if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw) else raw.replace(",", ".")
    try:
        return float(plain)
    except ValueError:
        return None


def _norm(text: str) -> str:
    return _WS.sub(" ", text).strip().casefold()


class _Known:
    """Everything an answer may take its claims from."""

    def __init__(self, texts: Iterable[str], numbers: Iterable[float], home: str) -> None:
        self.home = home.rstrip("/")
        self.texts = [t for t in texts if t]
        self.blob = "\n".join(_norm(self._tilde(t)) for t in self.texts)
        self.numbers: set[float] = set(numbers)
        # The parts of dates and times ("03" of "T03:30", "2026" of "2026-11-28"): an answer
        # may say them only where it speaks of a date or a time, or "7 files" would match a
        # file modified at 04:17.
        self.clock: set[float] = set()
        for text in self.texts:
            dated = _DATETIME.sub(lambda m: self._clock_parts(m.group(0)), text)
            for raw in _DIGITS.findall(dated):
                n = _number(raw)
                if n is not None:
                    self.numbers.add(n)
        # A clock read 15:30 may be said 3:30 pm.
        self.clock |= {n - 12 for n in self.clock if 13 <= n <= 23 and n == int(n)}
        self.tokens = content_tokens(self.blob)

    def _clock_parts(self, stamp: str) -> str:
        self.clock |= {float(part) for part in re.findall(r"\d+", stamp)}
        return " "

    def _tilde(self, text: str) -> str:
        return text.replace(self.home + "/", "~/") if self.home else text

    def has_text(self, text: str) -> bool:
        needle = _norm(self._tilde(text)).strip(" .,;:!?\"'")
        return bool(needle) and needle in self.blob

    def has_text_any(self, texts: Iterable[str]) -> bool:
        return any(self.has_text(text) for text in texts)

    def has_path(self, path: str) -> bool:
        path = path.rstrip(".,;:!?)")
        if self.has_text(path):
            return True
        name = path.rsplit("/", 1)[-1]
        # A path given relative to a folder the steps listed: its file name was in them.
        return bool(name) and "/" in path and self.has_text(name) and any(
            self.has_text(folder) for folder in _prefixes(path))

    def has_number(self, value: float, *, about_time: bool = False) -> bool:
        return value in self.numbers or (about_time and value in self.clock)


def _prefixes(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts)) if "/".join(parts[:i]) not in ("", "~", ".")]


# --- the answer ------------------------------------------------------------------

def _items(answer: str) -> list[str]:
    """The items of the answer's lists, and the lines it sets out under a lead-in
    ("The last lines are:\\nx\\ny") or in a code block."""
    items: list[str] = []
    for m in _FENCE.finditer(answer):
        items += [line.strip() for line in m.group("body").splitlines() if line.strip()]
    body = _FENCE.sub("\n", answer)
    under_lead_in = False
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped:
            under_lead_in = False
            continue
        bullet = _BULLET.match(line)
        if bullet:
            items.append(bullet.group("item"))
        elif under_lead_in:
            items.append(stripped)
        if stripped.endswith(":") and not bullet:
            under_lead_in = True
    return [i for i in (_MARKUP.sub("", i).strip() for i in items) if i]


def _quotes(answer: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _QUOTED.finditer(_FENCE.sub("\n", answer))]


def _item_found(item: str, known: _Known) -> bool:
    if known.has_text(item):
        return True
    head = _HEAD_END.split(item, maxsplit=1)[0].strip(" .,;:!?\"'")
    if head and head != item and known.has_text(head):
        return True
    words = content_tokens(item)
    # Prose set out as a list ("- it has no errors"): most of its words are the data's.
    return bool(words) and len(words & known.tokens) >= max(1, (2 * len(words) + 2) // 3)


def _claims_unmatched(answer: str, known: _Known, names: Collection[str] = (), *, quoted_names: bool = True) -> list[str]:
    unmatched: list[str] = []

    def miss(part: str) -> None:
        if part not in unmatched:
            unmatched.append(part)

    covered: list[str] = []
    for url in _URL.findall(answer):
        covered.append(url)
        if not known.has_text(url.rstrip(".,;:!?")):
            miss(url.rstrip(".,;:!?"))
    rest = _URL.sub(" ", answer)
    for path in _PATHLIKE.findall(rest):
        path = path.rstrip(".,;:!?)")
        if len(path) < 3 or re.fullmatch(r"[\d.,/]+", path) or path.count(".") == len(path):
            continue  # a number (1.5, 3/4), not a path
        covered.append(path)
        if not known.has_path(path):
            miss(path)
    for quote in _quotes(rest):
        covered.append(quote)
        if quoted_names and quote in names:
            continue  # a tool named in quotes ("the tool \"write_files\" was called twice"), as named bare below
        # A quotation is verbatim: found as it is, or every word of it found.
        if not known.has_text(quote) and not (content_tokens(quote) and content_tokens(quote) <= known.tokens):
            miss(quote)
    for item in _items(answer):
        if not _item_found(item, known):
            miss(item)
    free = _PATHLIKE.sub(" ", rest)
    for name in _IDENTIFIER.findall(free):
        if name not in names and not known.has_text(name) and not any(name in part for part in covered):
            miss(name)
    for m in _ANSWER_NUMBER.finditer(free):
        raw, value = m.group(0), _number(m.group(0))
        if value is None or _STEP_NUMBER.search(free[max(0, m.start() - 8):m.start()]):
            continue  # "step 1": the turn's own step, which the runtime named to the model, not a fact of the data
        about_time = _TIME_WORDS.search(free[max(0, m.start() - 16):m.end() + 16]) is not None or 1900 <= value <= 2100
        if not known.has_number(value, about_time=about_time) and not known.has_number(abs(value), about_time=about_time):
            miss(raw)
    return unmatched


def names_given(answer: str) -> list[str]:
    """The names ``answer`` gives: a town, a person, a day ("You are in the town of London"), written as
    words that start with a capital where no sentence or line starts."""
    out: list[str] = []
    for m in _WORD_TOKEN.finditer(answer):
        word = m.group()
        if (len(word) > 1 and word[0].isupper() and not word.isupper() and word not in out and content_tokens(word)
                and not _OPENS.search(answer, max(0, m.start() - 40), m.start())):
            out.append(word)
    return out


def claims(answer: str, names: Collection[str] = ()) -> list[str]:
    """What in ``answer`` the grounding check looks for in the steps' results: addresses, paths,
    quotations, list items, names and numbers (none in "The last commit did not change any files.")."""
    return _claims_unmatched(answer, _Known((), (), ""), names)


def after_a_loop(answer: str, request: str, steps: Sequence[StepData], *, home: str = "", names: Collection[str] = ()) -> str:
    """Why an answer the model gave once stopped for repeating itself cannot stand: it names nothing the
    steps found beyond what the request said (the 1.5B, looping on a folder's listing with no step that
    asked git, answered that the last commit in the repository, by the path the request gave, changed no
    files); "" when it names something a step found."""
    observations = [s.observation for s in steps]
    in_steps = _Known([leaf for obs in observations for leaf in leaves(obs)],
                      [float(n) for obs in observations for n in _lengths(obs)], home)
    not_in_steps = _claims_unmatched(answer, in_steps, names)
    not_asked = _claims_unmatched(answer, _Known([request], (), home), names)
    found = [c for c in not_asked if c not in not_in_steps]
    return "" if found else i18n.english("turn.grounding.bare_after_loop")


def _exactness(ask: ExactAsk, answer: str, steps: Sequence[StepData], known_computed: _Known, *, wanted: str | None = None,
               slice_end: bool = True, whole_lists: bool = True) -> str:
    """Why the answer does not meet ``ask``, or "" when it does."""
    asked = ask.words()
    if whole_lists and ask.end in ("top", "last"):
        # The top or the end of a list a limit cut is not the whole's: the 1.5B listed one file of three
        # (max_results 1) and the newest of that one was answered.
        worked = [s for s in steps if s.computed and isinstance(s.observation.get("entries"), list)]
        if worked and all(s.partial for s in worked):
            return i18n.english("turn.grounding.from_a_part", asked=asked, executor=worked[-1].executor)
        steps = [s for s in steps if not (s.computed and s.partial)]
    if ask.end == "top":
        # Only a sort ranks: a slice of the data's order ("the last line") is not its top.
        sorts = [s for s in steps if s.executor.startswith("sort_") and isinstance(s.observation.get("entries"), list)]
        # Nothing to rank when every list a plain step gave (files, not a text's lines) holds no more
        # than was asked for, and none was cut short: the one PDF of a folder is its largest.
        plain = [s for s in steps if not s.computed and isinstance(s.observation.get("entries"), list)]
        lists = [s.observation["entries"] for s in plain]
        texts = any(isinstance(e, Mapping) and isinstance(e.get("content"), str) for found in lists for e in found)
        whole = not whole_lists or not any(s.partial for s in plain)
        if not sorts and lists and not texts and whole and all(len(found) <= (ask.count or 1) for found in lists):
            return ""
        if not sorts:
            return i18n.english("turn.grounding.no_sort", asked=asked)
        top = sorted_top(sorts[-1].observation, ask.count or 1, wanted)
        names = [leaf for e in top for leaf in leaves(e) if len(leaf) >= 2 and not re.fullmatch(r"[\d.,:\-T+Z /]+", leaf)]
        if names and not any(n.casefold() in answer.casefold() for n in names):
            return i18n.english("turn.grounding.not_the_top", asked=asked, first=repr(names[0]))
    elif not any(s.computed for s in steps):
        return i18n.english("turn.grounding.not_worked_out", asked=asked)
    given = _items(answer) or [line.strip() for line in answer.splitlines() if line.strip()]
    if ask.count is not None and len(given) > 1 and len(given) != ask.count:
        return i18n.english("turn.grounding.how_many", asked=asked, given=len(given))
    # What it quotes as the answer is what the working out returned (the 1.5B sent a list's heading
    # and answered with its first item, quoted from the plain read).
    outside = [q for q in _quotes(answer) if not _item_found(q, known_computed)]
    outside += [g for g in given if len(given) > 1 and not _item_found(g, known_computed)]
    if outside:
        return i18n.english("turn.grounding.not_among", asked=asked, outside=repr(outside[0]))
    if slice_end and ask.what == "lines" and ask.end in ("first", "last") and ask.count:
        # A slice at the wrong end is still a step's result: the 0.5B took the first five lines for "the last
        # line" and answered with the first.
        elsewhere = _quoted_away_from_the_end(answer, steps, ask)
        if elsewhere:
            return i18n.english("turn.grounding.not_at_the_end", asked=asked, outside=repr(elsewhere))
    if ask.what == "lines" and len(given) > 1:
        swapped = _out_of_order(given, steps)
        if swapped is not None:
            return i18n.english("turn.grounding.out_of_order", asked=asked, first=repr(swapped[0]), second=repr(swapped[1]))
    return ""


def _read_texts(steps: Sequence[StepData]) -> list[str]:
    """The whole texts the plain steps read (a file's content, not cut short)."""
    texts = []
    for s in steps:
        if s.computed:
            continue
        if isinstance(s.observation.get("content"), str) and not s.observation.get("truncated"):
            texts.append(s.observation["content"])
        for e in s.observation.get("entries") or ():
            if isinstance(e, Mapping) and isinstance(e.get("content"), str) and not e.get("truncated"):
                texts.append(e["content"])
    return texts


# A line shorter than this is too common to say the answer quotes it ("ok", "---").
_QUOTABLE = 8


def _quoted_away_from_the_end(answer: str, steps: Sequence[StepData], ask: ExactAsk) -> str:
    """A line of a text the turn read that the answer quotes though it is not among that end's ``ask.count``
    lines of any text read; "" when there is none."""
    at_the_end: set[str] = set()
    others: list[str] = []
    for text in _read_texts(steps):
        lines = [line.strip() for line in text.splitlines()]
        end = lines[-ask.count:] if ask.end == "last" else lines[:ask.count]
        at_the_end |= {_norm(line) for line in end if line}
        others += [line for line in lines if len(line) >= _QUOTABLE]
    # What the answer says besides the lines asked for: a line elsewhere may be a part of one of them.
    rest = _norm(answer)
    for line in sorted(at_the_end, key=len, reverse=True):
        rest = rest.replace(line, "\n")
    return next((line for line in others if _norm(line) not in at_the_end and _norm(line) in rest), "")


def _out_of_order(given: Sequence[str], steps: Sequence[StepData]) -> tuple[str, str] | None:
    """Two lines the answer gives the other way round from the last slice of lines that worked them out
    (the 1.5B gave a diary's last three lines as the fourth, the fifth, the third), or None."""
    sliced = [s for s in steps if s.computed and isinstance(s.observation.get("entries"), list)
              and any(isinstance(e, Mapping) and isinstance(e.get("text"), str) for e in s.observation["entries"])]
    if not sliced:
        return None
    texts = [str(e.get("text", "")).strip().casefold() for e in sliced[-1].observation["entries"] if isinstance(e, Mapping)]
    at: list[tuple[int, str]] = []
    for line in given:
        said = line.strip().casefold()
        # The line it is: the same text, else the longest line it holds (a bullet or a number before it).
        held = [(t == said, len(t), i) for i, t in enumerate(texts) if t and t in said]
        if not held:
            return None
        at.append((max(held)[2], line.strip()))
    return next(((a[1], b[1]) for a, b in zip(at, at[1:]) if b[0] < a[0]), None)


def sorted_top(observation: Mapping[str, Any], count: int, wanted: str | None) -> list[Any]:
    """The first ``count`` entries of a sort's result the ``wanted`` way round ("desc", "asc", None: as sorted)."""
    meta = observation.get("metadata") if isinstance(observation.get("metadata"), Mapping) else {}
    # A whole list sorted the other way round has its top at the end.
    reverse = wanted is not None and meta.get("order") not in (None, wanted) and meta.get("count_out") == meta.get("count_in")
    entries = observation["entries"]
    return entries[-count:] if reverse else entries[:count]


# A superlative the request asks for, and the order of a sort that gives it first.
_MOST = re.compile(r"\b(?:highest|largest|biggest|newest|latest|most recent(?:ly)?|most expensive|priciest|heaviest|longest|"
                   r"maximum|più (?:alt|grand|recent|car|lung|pesant)\w*)\b", re.IGNORECASE)
_LEAST = re.compile(r"\b(?:lowest|smallest|oldest|earliest|cheapest|lightest|shortest|minimum|"
                    r"più (?:bass|piccol|vecch|legger|cort)\w*|meno car\w*)\b", re.IGNORECASE)


def superlative_order(request: str) -> str | None:
    """"desc" when the request asks for the most of something, "asc" for the least, None for neither or both."""
    most, least = _MOST.search(request) is not None, _LEAST.search(request) is not None
    return None if most == least else ("desc" if most else "asc")


def _against_superlative(request: str, answer: str, steps: Sequence[StepData]) -> str:
    """Why the answer took the wrong end of a sort ("the highest" read off an ascending sort), or ""."""
    wanted = superlative_order(request)
    if wanted is None:
        return ""
    folded = answer.casefold()
    for step in steps:
        meta = step.observation.get("metadata") if isinstance(step.observation, Mapping) else None
        entries = step.observation.get("entries") if isinstance(step.observation, Mapping) else None
        if not step.executor.startswith("sort_") or not isinstance(meta, Mapping) or not entries or meta.get("order") in (None, wanted):
            continue
        if len(entries) > 1 and meta.get("count_out") == meta.get("count_in"):
            ends = [entries[0]]
        else:
            ends = entries  # Cut to the wrong end: all it kept is the wrong end.
        said = [leaf for e in ends for leaf in leaves(e) if len(leaf) >= 2 and not re.fullmatch(r"[\d.,:\-T+Z ]+", leaf)
                and leaf.casefold() in folded]
        if said:
            return i18n.english(f"turn.grounding.other_end.{'most' if wanted == 'desc' else 'least'}", field=repr(meta.get("field")),
                                said=repr(said[0]), order=meta.get("order"))
    return ""


# A clause that says a file is not there (en, it), or that it could not be read or is empty.
_MISSING = re.compile(r"\b(?:(?:does|did|do)\s*(?:not|n't)\s+exist|not exist|no such file|(?:is|are|was|were|be)\s+not\s+found"
                      r"|not be found|(?:could\s*not|couldn't|cannot|can't|can not|unable to|failed to)\s+(?:find|locate)"
                      r"|non esiste|non (?:è|sono) stat[oiae] trovat|non (?:ho|sono riuscit[oa] a)\s+(?:trovat|trovare))", re.IGNORECASE)
_UNREADABLE = re.compile(r"\b(?:(?:could\s*not|couldn't|cannot|can't|can not|unable to|failed to)\s+(?:read|open|access)"
                         r"|(?:is|was)\s+empty|non (?:ho|sono riuscit[oa] a)\s+(?:lett|leggere|apert|aprire)|è vuot[oa])",
                         re.IGNORECASE)
# Clauses end at a stop or a comma followed by a space ("notes.md" is not two), or at a "but".
_CLAUSE_END = re.compile(r"(?<=[.!?,;:])\s+|\n|\s(?:but|while|whereas|ma|mentre)\s", re.IGNORECASE)


def _found_paths(value: Any, *, read: bool) -> Iterable[str]:
    """The paths a step found (an entry with a path and no error) or, ``read``, read whole (with content)."""
    if isinstance(value, Mapping):
        if isinstance(value.get("path"), str) and "error" not in value and (not read or value.get("content")):
            yield value["path"]
        for v in value.values():
            yield from _found_paths(v, read=read)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _found_paths(v, read=read)


def _names(steps: Sequence[StepData], *, read: bool) -> set[str]:
    return {path.rstrip("/").rsplit("/", 1)[-1].casefold() for s in steps for path in _found_paths(s.observation, read=read)}


def _denied(answer: str, steps: Sequence[StepData]) -> list[str]:
    """The files the answer says are missing although a step found them, or unreadable or empty
    although a step read them (the 1.5B, told its read was already done, answered that the file
    it read "does not exist"; the 0.5B that a file a search had found "was not found")."""
    found, read = _names(steps, read=False), _names(steps, read=True)
    denied: list[str] = []
    for clause in _CLAUSE_END.split(_FENCE.sub("\n", answer)):
        against = (found if _MISSING.search(clause) else set()) | (read if _UNREADABLE.search(clause) else set())
        if not against:
            continue
        for path in _PATHLIKE.findall(clause):
            name = path.rstrip(".,;:!?)").rsplit("/", 1)[-1]
            if name.casefold() in against and name not in denied:
                denied.append(name)
    return denied


# "how many events have type login", "how many lines contain ERROR": a count of the ones that meet a
# condition (not "how many emails do I have": the gap holds no auxiliary nor a subject).
# (not "how many files the backup has" either: a determiner starts another subject, and the verb takes an object).
_GAP_WORD = (r"(?!(?:do|does|did|are|is|were|was|there|i|you|we|they|the|a|an|my|your|his|her|its|our|their|this|that|these|"
             r"those|il|lo|la|gli|le|un|una|mio|mia|miei|mie|tuo|tua|suo|sua)\b)[^\s?!]+\s+")
_COUNTED_SUBSET = re.compile(rf"\bhow many\s+(?:{_GAP_WORD}){{1,4}}(?:have|has|contain|contains|containing|with|that|which|whose|"
                             r"where|match|matching|mention|mentions|mentioning|include|includes|of type)\s+[^\s?.!]"
                             rf"|\bquant[ie]\s+(?:{_GAP_WORD}){{1,4}}(?:hanno|ha|contengono|contiene|con|che|di tipo)\s+[^\s?.!]",
                             re.IGNORECASE)


def _against_counted_subset(request: str, answer: str, steps: Sequence[StepData]) -> str:
    """Why a count of the lines or records of a text that meet a condition is not worked out, or "":
    such a count rests on a step that keeps the ones that meet it (a filter, or a program such as
    grep), never on the model reading the text nor on a count of every record (the 1.5B answered 5,
    the lines of a log, and then the count of all its records, for how many of them were logins)."""
    if not _COUNTED_SUBSET.search(request) or not _ANSWER_NUMBER.search(_PATHLIKE.sub(" ", answer)):
        return ""
    if any(s.executor.split("_", 1)[0] in ("filter", "run") for s in steps) or not any(textual(s.observation) for s in steps):
        return ""
    return ("the request asks how many of them meet a condition, and no step kept only the ones that meet it "
            "(filter the text's records or lines first, with a filter step on the read, then count what it keeps)")


# "the total size", "how much space do they take", "in tutto": one number over many, which a step adds up.
# ("in all" and "combined" are left out: "the files in all my folders" asks for no total.)
_TOTAL = re.compile(r"\b(?:total|totals|altogether|sum of|add(?:s|ed)? up|how much (?:disk |hard disk )?(?:space|room)"
                    r"|totale|totali|in tutto|complessiv[aoei]\w*|somma|quanto spazio|quanto occup\w*)\b", re.IGNORECASE)
# A step that works a number out of a list (a sum, a count) or a program that does (du, wc).
_WORKING_VERBS = ("compute", "run")


# "how many PDFs are in ~/docs", "quanti file ci sono", "count the notes": the count of a whole.
_HOW_MANY = re.compile(r"\b(?:how many|number of|count|quant[ie]|numero di|conta)\b", re.IGNORECASE)


def _against_counted_part(request: str, answer: str, steps: Sequence[StepData]) -> str:
    """Why a count the request asks for rests only on lists a limit cut, or "": a listing that kept five
    files of twelve (``max_results``, ``metadata.truncated``) counts five, and a read cut short counts the
    lines it kept, not the file's. A whole list, a working out of one, or a program's output (``wc``) counts."""
    if not _HOW_MANY.search(request) or not _ANSWER_NUMBER.search(_PATHLIKE.sub(" ", answer)):
        return ""
    counting = [s for s in steps if isinstance(s.observation.get("entries"), list) or s.computed
                or s.executor.split("_", 1)[0] in _WORKING_VERBS]
    if not counting or not all(s.partial for s in counting):
        return ""
    return i18n.english("turn.grounding.counted_from_a_part", executor=counting[-1].executor)


def _entry_numbers(observation: Mapping[str, Any]) -> list[float]:
    """The numbers the entries of a list of several hold, each as given: what one entry says, not their total."""
    rows = _rows(observation)
    if len(rows) < 2:
        return []
    return [float(v) for row in rows for v in row.values() if isinstance(v, int | float) and not isinstance(v, bool)]


def _against_one_for_all(request: str, answer: str, steps: Sequence[StepData]) -> str:
    """Why a total the request asks for is one entry's number, or "": a total over several entries rests on a step
    that adds them up (the 0.5B gave one file's size as a folder's size, a number a step returned)."""
    if not _TOTAL.search(request) or any(s.executor.split("_", 1)[0] in _WORKING_VERBS for s in steps):
        return ""
    singles = {n for s in steps for n in _entry_numbers(s.observation)}
    given = [raw for raw in _ANSWER_NUMBER.findall(_PATHLIKE.sub(" ", answer)) if _number(raw) in singles]
    if not given:
        return ""
    return i18n.english("turn.grounding.one_for_all", given=given[0])


# An answer's opening yes or no, English and Italian ("Yes, it is", "No.", "Sì, ...").
_YES_NO_ANYHOW = re.compile(r"^\W*(yes|yeah|yep|no|nope|si|sì)\b", re.IGNORECASE)
# The same, "no" and an unaccented "si" only standing alone, before a stop or at the end: "No meeting then"
# opens with a determiner, "Si tiene giovedì" with a reflexive.
_YES_NO = re.compile(r"^\W*(yes|yeah|yep|nope|sì|(?:no|si)(?=\s*(?:[,.!;:]|$)))\b", re.IGNORECASE)
_YES = frozenset({"yes", "yeah", "yep", "si", "sì"})


def _verdicts(value: Any, depth: int = 1) -> Iterable[tuple[str, bool]]:
    """The ``is_<word>`` truth values an observation gives, top level and ``depth`` levels into its mappings."""
    if not isinstance(value, Mapping):
        return
    for key, inner in value.items():
        if isinstance(key, str) and key.startswith("is_") and isinstance(inner, bool):
            yield key[3:], inner
        elif depth:
            yield from _verdicts(inner, depth - 1)


def _against_verdict(request: str, answer: str, steps: Sequence[StepData],
                     asked_by: Mapping[str, Mapping[str, Collection[str]]], *, standalone: bool) -> str:
    """Why an answer's yes or no says the opposite of a step's own verdict on what the request asks, or "":
    a calendar step answered ``is_free: false`` to a question whether the user was free at some hour, and the
    1.5B said yes. Only a verdict the request asks counts: by a word its executor's output schema names for it
    (``asked_by``, executor -> field -> words: "libero" asks is_free), or by the field's own word (a question
    whether the user is busy is not asked by ``is_free``). ``standalone`` False reads "no" and "si" before any
    word as a turn recorded before it did."""
    said = (_YES_NO if standalone else _YES_NO_ANYHOW).match(answer)
    if said is None:
        return ""
    yes = said.group(1).casefold() in _YES
    words = {w.casefold() for w in content_tokens(request)}
    for step in reversed(steps):
        for word, value in _verdicts(step.observation):
            asking = asked_by.get(step.executor, {}).get(f"is_{word}") or {word.casefold()}
            if not words.isdisjoint(asking) and value != yes:
                return i18n.english("turn.grounding.against_verdict", said=said.group(1), executor=step.executor,
                                    field=f"is_{word}", value=str(value).lower())
    return ""


_LINKS = re.compile(r"\b(?:links?|urls?|hyperlinks?|web addresses|collegament[io]|indirizzi web)\b", re.IGNORECASE)
_LINK_FIELDS = frozenset({"url", "href", "link", "links", "urls"})
# Steps whose answer is what they did, not the data they found (the links saved, sent).
_ACTING_VERBS = ("write", "send", "move", "delete", "set")


def _links_in(value: Any, *, field: str = "") -> Iterable[str]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _links_in(inner, field=str(key).casefold())
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from _links_in(inner, field=field)
    elif isinstance(value, str) and value.strip() and (field in _LINK_FIELDS or _URL.fullmatch(value.strip())):
        yield value.strip()


def _against_no_link(request: str, answer: str, steps: Sequence[StepData], *, named: bool = False) -> str:
    """Why an answer to a request for links gives none of those the steps found, or "" (the 0.5B listed the
    links' texts, every one in a result, and none of their addresses). ``named``: the page's own address, which
    the request gives, is none of the links found on it (the 1.5B answered with it alone); False for a turn
    recorded before."""
    if not _LINKS.search(request) or any(s.executor.split("_", 1)[0] in _ACTING_VERBS for s in steps):
        return ""
    given = {url.rstrip("/") for url in named_targets(request).urls} if named else set()
    found = [link for link in dict.fromkeys(link for s in steps for link in _links_in(s.observation))
             if link.rstrip("/") not in given]
    if not found or any(link in answer for link in found):
        return ""
    return i18n.english("turn.grounding.no_link", count=len(found))


# Steps that set out entries they were given, which a step with no input of its own may have been typed.
_SHAPING_VERBS = ("describe", "filter")


def _against_local_reading(request: str, answer: str, steps: Sequence[StepData], home: str) -> str:
    """Why an answer is no more than a value a local step read (the clock), when the request names data (a page,
    a file, a folder) that a step read and that value is not in it, or "": asked until when a reading room it had
    just fetched the page of is open, the 0.5B read the clock and answered its timestamp."""
    named = named_targets(request)
    targets = [t.rstrip("/") for t in (*named.urls, *named.files, *named.folders)]
    if not targets or any(s.executor.split("_", 1)[0] in _ACTING_VERBS for s in steps):
        return ""
    given = _norm(_MARKUP.sub("", answer)).strip(" .;:!?\"'“”«»")
    if not given:
        return ""
    read = [s for s in steps if s.source != prov.LOCAL and _Known(leaves(s.observation), (), home).has_text_any(targets)]
    if not read or _Known([request, *(leaf for s in read for leaf in leaves(s.observation))], (), home).has_text(given):
        return ""
    for step in steps:
        if (step.source == prov.LOCAL and not step.computed and step.executor.split("_", 1)[0] not in _SHAPING_VERBS
                and any(_norm(leaf).strip(" .") == given for leaf in leaves(step.observation))):
            return i18n.english("turn.grounding.local_reading", executor=step.executor, target=targets[0])
    return ""


# A request that asks which one (en, it): "which markdown file ...", "what document ...", "quale file ...".
_WHICH = re.compile(r"\b(?:which|quale|quali|qual)\b|\bwhat\s+(?:\w+\s+)?(?:file|document|note|photo|picture|image|folder|directory)s?\b"
                    r"|\bche\s+(?:file|document[oi]|not[ae]|foto|immagin[ei]|cartell[ae])\b", re.IGNORECASE)


def _against_unnamed_pick(request: str, answer: str, steps: Sequence[StepData]) -> str:
    """Why an answer to "which file is the newest/largest" names none of the files the last listing
    gave, or "": the 0.5B, asked which markdown file was modified most recently, answered the date."""
    if superlative_order(request) is None or _WHICH.search(request) is None:
        return ""
    for step in reversed(steps):
        entries = step.observation.get("entries") if isinstance(step.observation, Mapping) else None
        if not isinstance(entries, list) or not entries or is_file_list(entries):
            continue
        paths = [e.get("path") for e in entries if isinstance(e, Mapping)]
        if len(paths) != len(entries) or not all(isinstance(p, str) and p for p in paths):
            continue
        names = list(dict.fromkeys(p.rstrip("/").rsplit("/", 1)[-1] for p in paths))
        folded = answer.casefold()
        if any(name.casefold() in folded for name in names):
            return ""
        return i18n.english("turn.grounding.unnamed_pick", executor=step.executor, count=len(names),
                            names=", ".join(names[:5]) + (", ..." if len(names) > 5 else ""))
    return ""


def check_answer(answer: str, *, request: str, steps: Sequence[StepData], home: str = "", exact: bool = True,
                 names: Collection[str] = (), whole: bool = True, quoted_names: bool = True, verdicts: bool = True,
                 verdict_words: Mapping[str, Mapping[str, Collection[str]]] | None = None,
                 names_without_steps: bool = True, named_data: bool = True, picks_named: bool = True,
                 slice_end: bool = True, whole_lists: bool = True, whole_counts: bool = True) -> Grounding:
    """Check ``answer`` against the turn's good ``steps`` and the ``request``; ``exact`` False when what the
    request asks to work out is not the turn's to do (a schedule does it at each run); ``names`` are what
    the turn's tools and their arguments are called, which an answer may name ("read_files is out of service");
    ``whole`` False for a turn recorded before a total and links were checked as wholes, ``quoted_names`` False
    for one recorded before a tool named in quotes was the turn's own, ``verdicts`` False for one recorded before a
    yes or no was checked against a step's verdict; ``verdict_words``: executor -> verdict field -> the words
    that ask it (``TurnCatalogue.verdict_words``), None for a turn recorded before they were read, whose "no"
    before any word was a no; ``names_without_steps`` False for one recorded before an answer given with no
    step was held to the names the request gave (:func:`names_given`: with nothing looked at, a town or a
    person the request did not name is the model's own; with steps, the data's wording of a name varies
    too much to hold an answer to it); ``named_data`` False for one recorded before an answer was held to the data
    the request names (not a local step's reading alone, nor the page's own address for its links); ``picks_named``
    False for one recorded before an answer to "which file is the newest" had to name one; ``slice_end`` False for
    one recorded before an answer to "the last N lines" had to quote no line from elsewhere in the text; ``whole_lists``
    False for one recorded before the top or the end of a list a limit cut stopped counting as the whole's, ``whole_counts``
    False for one recorded before a count of such a list stopped counting as the whole's."""
    observations = [s.observation for s in steps]
    texts = [request, *(leaf for obs in observations for leaf in leaves(obs)),
             *dict.fromkeys(name for obs in observations for name in _field_names(obs))]
    counts = [n for obs in observations for n in _lengths(obs)]
    known = _Known(texts, [float(n) for n in counts], home)
    unmatched = _claims_unmatched(answer, known, names, quoted_names=quoted_names)
    if names_without_steps and not steps:
        unmatched += [name for name in names_given(answer) if name not in names and not known.has_text(name)]
    ask = exact_ask(request)
    # The wrong end of a sort is the more telling reason, so it is looked for first.
    exactness = (_against_superlative(request, answer, steps) or _against_counted_subset(request, answer, steps)
                 or (_against_counted_part(request, answer, steps) if whole_counts else "")
                 or (whole and (_against_one_for_all(request, answer, steps) or _against_no_link(request, answer, steps, named=named_data)))
                 or (_against_local_reading(request, answer, steps, home) if named_data else "")
                 or (_against_unnamed_pick(request, answer, steps) if picks_named else "")
                 or (_against_verdict(request, answer, steps, verdict_words or {}, standalone=verdict_words is not None)
                     if verdicts else "")) if exact else ""
    if ask is not None and exact and not exactness:
        computed = [s.observation for s in steps if s.computed]
        known_computed = _Known([leaf for obs in computed for leaf in leaves(obs)],
                                [float(n) for obs in computed for n in _lengths(obs)], home)
        exactness = _exactness(ask, answer, steps, known_computed, wanted=superlative_order(request), slice_end=slice_end,
                                whole_lists=whole_lists)
    return Grounding(tuple(unmatched), exactness, tuple(_denied(answer, steps)))


def sort_key(request: str, observations: Sequence[tuple[int, Mapping[str, Any]]]) -> tuple[int, str] | None:
    """The latest of the ``(step, observation)`` lists whose rows have a field the request
    names ("the highest amount": a CSV's amount column), and that field; None when no list
    has one. A read file counts by the rows it opens into (a CSV's header)."""
    words = {w.casefold() for w in content_tokens(request)}
    for number, observation in reversed(observations):
        for row in _rows(observation)[:1]:
            named = sorted(k for k in row if isinstance(k, str) and k.casefold() in words)
            if named:
                return number, named[0]
    return None


def _rows(observation: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    entries = observation.get("entries")
    if not isinstance(entries, list):
        return []
    if is_file_list(entries):
        try:
            entries = file_rows(entries)[0]
        except RecordsError:
            return []
    return [e for e in entries if isinstance(e, Mapping)]


def working_out_call(ask: ExactAsk, offered: Mapping[str, Collection[str]], data_step: int, *,
                     textual: bool = False, key: tuple[int, str] | None = None, order: str | None = None) -> dict[str, Any] | None:
    """The call that works ``ask`` out of step ``data_step``'s data, from the
    ``offered`` tools (name -> its argument names): a tool of the right verb (an
    extract for lines, and for the first or last items of a text; a sort for the
    top K of a list), with the ask's count under the argument named for the ask's
    end ("last": 3), or under "limit". A sort that takes a field sorts ``key``'s
    step by its field (:func:`sort_key`), when the request names one, the way round
    the request's superlative says. None when no offered tool does it."""
    verb = "extract" if ask.what == "lines" or (textual and ask.end != "top") else "sort"
    for name in sorted(offered):
        if name.split("_", 1)[0] != verb:
            continue
        args: dict[str, Any] = {"from_step": data_step}
        if verb == "sort" and "field" in offered[name] and key is not None:
            # Without a field the request names, the step's own completion gives one where it can (a file's size).
            args = {"from_step": key[0], "field": key[1]}
            if "order" in offered[name] and order is not None:
                args["order"] = order
        count = ask.count if ask.count is not None else 3
        slot = next((a for a in (ask.end, "limit") if a in offered[name]), None)
        if slot is not None:
            args[slot] = count
        if ask.what in offered[name] and ask.what != "lines":
            # The tool takes the kind of thing asked for as a switch ("items": the items of a list in a text).
            args[ask.what] = True
        return {"name": name, "arguments": args}
    return None


def repair_prompt(grounding: Grounding, call: Mapping[str, Any] | None = None) -> str:
    """What the model is told when its answer did not hold up (once a turn);
    ``call``, the step that would work out an exact ask, is suggested as such."""
    how = ("call the tool that does it first" if call is None else
           f"call {call['name']} first, with arguments {json.dumps(call['arguments'])}, then answer from its result")
    return ("Your answer does not match the results: " + "; ".join(grounding.problems()) + ". "
            "Answer again using only values that appear in the tool results; if something has to be worked out "
            f"(a count, a slice, a sort), {how}. If it cannot be done, say so plainly.")
