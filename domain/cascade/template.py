"""Answer templates: an answer whose parts that came from the steps' outputs are slots.

An answer "Your list says: buy milk (8 bytes)" made from ``read_files``'
output ``{"content": "buy milk", "size": 8}`` becomes the segments
``[{"text": "Your list says: "}, {"ref": [1, "content"]}, {"text": " ("},
{"ref": [1, "size"]}, {"text": " bytes)"}]``.
Rendered on the new outputs, the slots take the new values. A value quoted
without the whitespace around it (a file's content without its closing
newline, CRLF lines as LF) is a ``trim`` slot: the new value is trimmed the
same way. A number quoted in the answer that also stands inside an
output text (a line of a file, a content too short to be a slot) is not
slotted: which of the two the model quoted cannot be told, so it stays literal, and :mod:`domain.cascade.provenance` then refuses the
template. A number two outputs' values share (an empty file's size and its
line count, both 0) is a slot on the first with the others as ``or``: on new
outputs where they differ, which of them the answer meant cannot be told, and
the template gives no answer. Text the model derived from an output without quoting it (a count,
a summary) stays literal: :func:`derived_digits` says whether such text may
be in a template, which decides whether it can be learnt without the user's
approval.
"""

from __future__ import annotations

import re
from typing import Any

from domain.errors import MetnosError

# Below this length a string output is too common to stand for a value (the
# same "ok" or "md" shows up anywhere in an answer).
MIN_STRING = 3
MAX_LEAVES = 4000
_HOLE = re.compile(r"⟦\d+(?::name)?⟧")


class TemplateGap(MetnosError):
    """A slot of the template has no value in the new outputs."""


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """(path, text) of every string or number inside an output, at most MAX_LEAVES."""
    found: list[tuple[tuple[Any, ...], str]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [(path, value)]
    while stack and len(found) < MAX_LEAVES:
        at, item = stack.pop()
        if isinstance(item, dict):
            # Metadata included: get_now's date, a count, a size are values an answer quotes.
            stack.extend((at + (k,), v) for k, v in reversed(list(item.items())) if k != "ok")
        elif isinstance(item, list):
            stack.extend((at + (i,), v) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, (int, float)):
            found.append((at, str(item)))
        elif isinstance(item, str) and len(item.strip()) >= MIN_STRING:
            found.append((at, item))
    return found


def trimmed(text: str) -> str:
    """A text as an answer quotes it: its line ends as LF, no whitespace around it."""
    return text.replace("\r\n", "\n").strip()


def observed_strings(value: Any, *, numbers: bool = True) -> list[str]:
    """Every string (and number) inside an output, however short and however many
    (what :func:`leaves` leaves out too): the text an answer may have taken from it."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(v for k, v in item.items() if k != "ok")
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, str) or (numbers and isinstance(item, (int, float))):
            found.append(str(item))
    return found


def _is_number(value: str) -> bool:
    return value.replace(".", "", 1).isdigit()


def _number_pattern(value: str) -> re.Pattern[str]:
    # A number stands alone: 4 is not the 4 of 2024.
    return re.compile(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)")


def _occurrences(text: str, value: str) -> list[tuple[int, int]]:
    pattern = _number_pattern(value) if _is_number(value) else re.compile(re.escape(value))
    return [m.span() for m in pattern.finditer(text)]


def _ambiguous_number(value: str, outputs: dict[int, Any]) -> bool:
    """Whether a number also stands inside an output text other than a slot of
    that very value (a line of a file, a content too short to be a slot): the
    answer may have quoted either."""
    pattern = _number_pattern(value)
    for output in outputs.values():
        for text in observed_strings(output, numbers=False):
            bare = trimmed(text)
            if pattern.search(text) and not (bare == value and len(bare) >= MIN_STRING):
                return True
    return False


def make_template(answer: str, outputs: dict[int, Any]) -> list[dict[str, Any]]:
    """The answer cut into literal text and references to the outputs it quotes.

    Longer values are placed first, so a file's whole content wins over a word
    in it; a span already taken is not taken again."""
    candidates: list[tuple[tuple[Any, ...], str, bool]] = []
    for step, output in sorted(outputs.items()):
        for path, text in leaves(output):
            candidates.append(((step, *path), text, False))
            bare = trimmed(text)
            if bare != text and len(bare) >= MIN_STRING:
                candidates.append(((step, *path), bare, True))
    candidates.sort(key=lambda c: -len(c[1]))
    # Every value a number could be a slot on: one that several share is told apart only by new outputs.
    holders: dict[str, list[list[Any]]] = {}
    for ref, value, trim in candidates:
        if _is_number(value) and not trim:
            holders.setdefault(value, []).append(list(ref))
    taken: list[tuple[int, int, list[Any], bool]] = []
    ambiguous: dict[str, bool] = {}
    for ref, value, trim in candidates:
        found = _occurrences(answer, value)
        if found and _is_number(value) and ambiguous.setdefault(value, _ambiguous_number(value, outputs)):
            continue
        for start, end in found:
            if not any(start < e and s < end for s, e, _, _ in taken):
                taken.append((start, end, list(ref), trim))
    segments: list[dict[str, Any]] = []
    at = 0
    for start, end, ref, trim in sorted(taken):
        if start > at:
            segments.append({"text": answer[at:start]})
        segment: dict[str, Any] = {"ref": ref, "trim": True} if trim else {"ref": ref}
        others = [r for r in holders.get(answer[start:end], []) if r != ref] if not trim else []
        if others:
            segment["or"] = others
        segments.append(segment)
        at = end
    if at < len(answer):
        segments.append({"text": answer[at:]})
    return segments


def _value_at(ref: list[Any], outputs: dict[int, Any]) -> Any:
    step, *path = ref
    value: Any = outputs.get(step)
    for key in path:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
            value = value[key]
        else:
            msg = f"the answer quoted step {step}'s {'.'.join(map(str, path))}, which the new output lacks"
            raise TemplateGap(msg)
    if isinstance(value, (dict, list)) or value is None:
        msg = f"the answer quoted step {step}'s {'.'.join(map(str, path))}, which is no longer a value"
        raise TemplateGap(msg)
    return value


def _name(ref: list[Any]) -> str:
    step, *path = ref
    return f"step {step}'s {'.'.join(map(str, path))}"


def render(segments: list[dict[str, Any]], outputs: dict[int, Any]) -> str:
    parts: list[str] = []
    for segment in segments:
        if "text" in segment:
            parts.append(segment["text"])
            continue
        value = _value_at(segment["ref"], outputs)
        for other in segment.get("or", ()):
            value_at = _value_at(other, outputs)
            if str(value_at) != str(value):
                msg = (f"the answer's number was {_name(segment['ref'])} or {_name(other)}, the same when it was learnt; "
                       f"now {value} and {value_at}, which it meant cannot be told")
                raise TemplateGap(msg)
        parts.append(trimmed(str(value)) if segment.get("trim") else str(value))
    return "".join(parts)


def derived_digits(segments: list[dict[str, Any]], request: str) -> list[str]:
    """Numbers in the literal text that the request does not hold: probably
    computed by the model from an output (a count, a sum), so stale when the
    output changes."""
    # A template's holes (⟦0⟧, domain/cascade/plan.py) are the request's own values, not numbers.
    literal = _HOLE.sub(" ", " ".join(s["text"] for s in segments if "text" in s))
    return [n for n in re.findall(r"\d+(?:\.\d+)?", literal) if n not in request]
