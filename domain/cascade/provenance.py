"""Where a plan's fixed text came from: a plan replays what was done, never what was seen.

A plan keeps as literal text whatever of its answer it could not point at in
the steps' outputs (domain/cascade/template.py), and each step's arguments
as the model wrote them. That text may hold the request's own words (its
slot values are holes, bound anew on every run) and the model's own wording;
it may never hold a value a step returned, since a run on other values, or
on the same file changed since, would give that value again: the answer to
"read ~/notes/e.txt" with d.txt's content. :func:`carried` says what a plan
would carry; a plan that carries anything is learnt neither by L1 nor for
approval.

The answer's literal text is compared word by word, case and Unicode forms
folded, digits apart from letters. A word is the steps' when an output holds
it as a word, or as its whole value (a file holding one word), unless the
request holds it outside its slot values, or it is a function word (an
article, a pronoun, a preposition: the frame of an answer, never its value
unless it is the whole of one). Characters of scripts written without spaces,
and symbols (an emoji, a currency sign), are compared one by one. An
argument is the steps' when it is, whole, a value an earlier step returned
(a path copied out of a listing, a line a filter looks for) that the request
does not hold and that is not a field name of the outputs.

This refuses more than it must (a file that happens to hold "file" or
"says" keeps an answer worded with them from being learnt): a turn not learnt
costs one model call when asked again, a template carrying data answers
wrongly without a word.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from domain.cascade.plan import LIST_REFERENCES, hollow_text
from domain.cascade.request import Slot, intent_of
from domain.cascade.template import observed_strings, trimmed

_WORD = re.compile(r"\d+|[^\W\d_]+")
_HOLE = re.compile(r"⟦\d+(?::name)?⟧")
_STEP_REF = re.compile(r"\{\{\s*step\d+")
# Thai, Myanmar, Khmer, kana, CJK ideographs: written without spaces between words.
_SPACELESS = re.compile(r"[\u0e00-\u0e7f\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

# Closed-class words of English and Italian (the seeds' languages), and the
# pieces contractions leave ("it's" is "it" and "s"): the frame of an answer.
FUNCTION_WORDS = frozenset("""
    a an the this that these those it its he she they them their theirs there here i me my mine you your yours
    we us our ours his her hers him himself herself itself themselves myself yourself
    and or but nor so if then than as of in on at to from by for with about into onto over under
    between through up down out off is are was were be been being am do does did done have has had having
    will would can could shall should may might must not what which who whom whose where when why how
    s t d ll re ve m
    il lo la gli le un uno una di da con su per tra fra del dello della dei degli delle al allo alla ai
    agli alle dal dallo dalla dai dagli dalle nel nello nella nei negli nelle sul sullo sulla sui sugli sulle
    e ed o ma se che chi cui non è sono era erano essere ha hanno ho hai abbiamo questo questa questi
    queste quello quella quelli quelle suo sua suoi sue tuo tua tuoi tue mio mia miei mie ci vi si ne
    come dove quando perché l
""".split())


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _words(text: str) -> list[str]:
    return _WORD.findall(_fold(text))


def _marks(text: str) -> set[str]:
    """The characters compared one by one: those of spaceless scripts, and every character past ASCII
    that is neither a word's nor a space (symbols, punctuation, marks, unassigned code points: a file
    holding U+D7FC alone taught a template whose literal text was that character)."""
    return {c for c in _fold(text) if _SPACELESS.match(c) or (ord(c) > 127 and not c.isspace() and not _WORD.match(c))}


def _asked_words(request: str, slots: list[Slot]) -> set[str]:
    """The request's words outside its slot values: the same in every request of its intent."""
    text = unicodedata.normalize("NFKC", request)
    outside, at = [], 0
    for slot in slots:
        outside.append(text[at:slot.start])
        at = slot.end
    outside.append(text[at:])
    return set(_words(" ".join(outside)))


class _Observed:
    """The steps' outputs as text: their words, their whole values, and whether they hold a character."""

    def __init__(self, outputs: list[Any]) -> None:
        self.texts = [_fold(t) for output in outputs for t in observed_strings(output)]
        self.words = {w for t in self.texts for w in _WORD.findall(t)}
        self.whole = {trimmed(t) for t in self.texts}

    def holds(self, mark: str) -> bool:
        return any(mark in t for t in self.texts)


def carried_words(answer: list[dict[str, Any]], outputs: dict[int, Any], request: str) -> list[str]:
    """The words of an answer template's literal text that came from the steps' outputs."""
    slots = intent_of(request)[1]
    literal = _HOLE.sub(" ", hollow_text("\n".join(s["text"] for s in answer if "text" in s), slots))
    asked = _asked_words(request, slots)
    seen = _Observed(list(outputs.values()))
    found: dict[str, None] = {}
    for word in _words(literal):
        if word in asked:
            continue
        if word in seen.whole or (word not in FUNCTION_WORDS and word in seen.words):
            found[word] = None
    for mark in sorted(_marks(literal)):
        if seen.holds(mark):
            found[mark] = None
    return list(found)


def carried_arguments(steps: list[dict[str, Any]], outputs: dict[int, Any], request: str) -> list[int]:
    """The steps (numbered from 1) whose arguments hold, whole, a value an earlier step returned."""
    asked = _fold(request)
    fields: set[str] = set()
    values: set[str] = set()
    carrying = []
    for number, step in enumerate(steps, start=1):
        if any(_carries(v, values, fields, asked) for k, v in step["args"].items() if k not in LIST_REFERENCES):
            carrying.append(number)
        output = outputs.get(number)
        values |= {trimmed(_fold(t)) for t in observed_strings(output, numbers=False)}
        fields |= _field_names(output)
    return carrying


def _carries(value: Any, values: set[str], fields: set[str], asked: str) -> bool:
    if isinstance(value, dict):
        return any(_carries(v, values, fields, asked) for v in value.values())
    if isinstance(value, list):
        return any(_carries(v, values, fields, asked) for v in value)
    if not isinstance(value, str) or _STEP_REF.search(value):
        return False
    bare = trimmed(_fold(value))
    return bool(bare) and bare in values and bare not in fields and bare not in asked


def _field_names(value: Any) -> set[str]:
    names: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            names |= {_fold(str(k)) for k in item}
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return names


def carried(plan: dict[str, Any], outputs: dict[int, Any], request: str) -> str | None:
    """Why the plan would answer with what this turn's steps returned, or None when it would not.

    The reason names how many words and which steps, never the words: it is kept
    in the plans projection and shown where the outputs themselves are not."""
    words = carried_words(plan["answer"], outputs, request)
    steps = carried_arguments(plan["steps"], outputs, request)
    reasons = []
    if words:
        reasons.append(f"its answer holds {len(words)} word{'s' if len(words) > 1 else ''} of what the steps returned "
                       "as fixed text (no slot could point at them: a part of a value, a value reworded or too short)")
    if steps:
        reasons.append(f"the arguments of step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))} hold a value "
                       "an earlier step returned, not taken from it by reference")
    return "; ".join(reasons) if reasons else None
