"""Answer templates: an answer whose parts that came from the steps' outputs are slots.

An answer "It is 19:40 (2026-11-24T19:40:02)" made from ``get_now``'s output
``{"content": "2026-11-24T19:40:02"}`` becomes the segments
``[{"text": "It is 19:40 ("}, {"ref": [1, "content"]}, {"text": ")"}]``.
Rendered on the new outputs, the slots take the new values. Text the model
derived from an output without quoting it (a count, a summary) stays literal:
:func:`derived_digits` says whether such text may be in a template, which
decides whether it can be learnt without the user's approval.
"""

from __future__ import annotations

import re
from typing import Any

from metnos.errors import MetnosError

# Below this length a string output is too common to stand for a value (the
# same "ok" or "md" shows up anywhere in an answer).
MIN_STRING = 3
MAX_LEAVES = 4000
_HOLE = re.compile(r"⟦\d+⟧")


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


def _occurrences(text: str, value: str) -> list[tuple[int, int]]:
    if value.replace(".", "", 1).isdigit():
        # A number stands alone: 4 is not the 4 of 2024.
        pattern = re.compile(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)")
    else:
        pattern = re.compile(re.escape(value))
    return [m.span() for m in pattern.finditer(text)]


def make_template(answer: str, outputs: dict[int, Any]) -> list[dict[str, Any]]:
    """The answer cut into literal text and references to the outputs it quotes.

    Longer values are placed first, so a file's whole content wins over a word
    in it; a span already taken is not taken again."""
    candidates = [((step, *path), text) for step, output in sorted(outputs.items()) for path, text in leaves(output)]
    candidates.sort(key=lambda c: -len(c[1]))
    taken: list[tuple[int, int, list[Any]]] = []
    for ref, value in candidates:
        for start, end in _occurrences(answer, value):
            if not any(start < e and s < end for s, e, _ in taken):
                taken.append((start, end, list(ref)))
    segments: list[dict[str, Any]] = []
    at = 0
    for start, end, ref in sorted(taken):
        if start > at:
            segments.append({"text": answer[at:start]})
        segments.append({"ref": ref})
        at = end
    if at < len(answer):
        segments.append({"text": answer[at:]})
    return segments


def render(segments: list[dict[str, Any]], outputs: dict[int, Any]) -> str:
    parts: list[str] = []
    for segment in segments:
        if "text" in segment:
            parts.append(segment["text"])
            continue
        step, *path = segment["ref"]
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
        parts.append(str(value))
    return "".join(parts)


def derived_digits(segments: list[dict[str, Any]], request: str) -> list[str]:
    """Numbers in the literal text that the request does not hold: probably
    computed by the model from an output (a count, a sum), so stale when the
    output changes."""
    # A template's holes (⟦0⟧, metnos/cascade/plan.py) are the request's own values, not numbers.
    literal = _HOLE.sub(" ", " ".join(s["text"] for s in segments if "text" in s))
    return [n for n in re.findall(r"\d+(?:\.\d+)?", literal) if n not in request]
