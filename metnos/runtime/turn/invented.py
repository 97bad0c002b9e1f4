"""A first call none of whose values the request gave: made up, not asked for.

Under the planner's grammar a round may call any offered tool or answer in
words, and the small models take the call even when no offered tool serves the
request: asked something the tools have nothing to do with, they call the
nearest one with values of their own, a number, a name or a code the request
never wrote. Such a call is not what the user asked for; run, its result
would be answered as if it were.

Before any step has run, the values of a call can come only from the request
(and the conversation it continues). A call is *made up* when it gives at least
one value that must come from there and none of them does. What is judged: the
required arguments the call gives (an optional one the model adds on its own
is often a guess made in good faith, and a tool that needs nothing needs no
value from anyone). What is not: booleans, values of an ``enum`` or a
``const``, a value equal to the schema's ``default``, a program's name
(``x-program``, one of the commands the configuration allows: "du" for "how
much space"), all choices the tool itself offers; paths (the sandbox policy's
path arguments: "my home" is ``~``), step references, and dates, times and
file-name patterns (worked out from "friday", "tomorrow", "the pdf files").
A value is *found* when one of its words is a word of the request (or shares
its stem: one is the start of the other, four letters or more), or when it is
a number the request writes, in digits, as a small number word, or as a
percentage. A lenient match: the check is meant to catch a call with nothing
of the request in it, never to judge how well a value was derived.

An optional argument is another matter once the call stands: a filter the
model adds as words of its own (a sender nobody named for a mail search, words
an event must hold for "what do I have on thursday?") narrows what the tool returns
without the user having asked. Such a value is *unasked*: a string (or a list
of strings) given to an optional argument, judged as above and not found in
the request. It is left out, so the tool's own default holds. Choices the
tool offers stay (an enum, the configured names of ``x-choices``), as do
numbers (a limit the model sets is a setting, "the newest" is one), and the
arguments of a program (``x-program``: its flags follow the program's syntax,
not the request's words).

Pure: it reads the call, its tool's schema and the text, so replay judges a
recorded call the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from metnos.mechanisms.sandbox.policy import is_path_argument
from metnos.runtime.step.catalogue import CHOICES_KEY
from metnos.runtime.step.piping import LIST_REFERENCES
from metnos.runtime.step.text import content_tokens, tokens

# Small numbers as words, in the languages the runtime speaks.
_NUMBER_WORDS = {word: float(n) for words in (
    "zero one two three four five six seven eight nine ten eleven twelve",
    "zero uno due tre quattro cinque sei sette otto nove dieci undici dodici",
) for n, word in enumerate(words.split())} | {"dozen": 12.0, "dozzina": 12.0}
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?(?P<percent>\s*(?:%|percent\b|per cent\b|per cento\b))?"
                     r"(?:\s+(?P<scale>thousand|mila|million|milion[ei]|billion|miliard[oi])\b)?", re.IGNORECASE)
_SCALES = {"thousand": 1e3, "mila": 1e3, "million": 1e6, "milione": 1e6, "milioni": 1e6, "billion": 1e9, "miliardo": 1e9, "miliardi": 1e9}
_DATE_OR_TIME = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?|\d{1,2}:\d{2}(?::\d{2})?")
# A file-name pattern ("*.pdf" for "the pdf files", "*.jpg" for "my photos"): a form worked out from words, like a date.
_GLOB = re.compile(r"[*?]")
_STEM = 4
_STEP_ARGUMENTS = frozenset(ref for ref, _ in LIST_REFERENCES)
# A program's name, held to the commands the configuration allows (run_commands): a choice like an enum's.
_PROGRAM = "x-program"


def made_up_arguments(arguments: Mapping[str, Any], parameters: Mapping[str, Any], known: str) -> tuple[str, ...]:
    """The required arguments a call gives, when none of their values is found in ``known`` (the call is made up);
    () when one is, or when the call gives none that is judged."""
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    judged = [key for key in parameters.get("required") or () if key in arguments
              and _judged(key, arguments[key], properties.get(key) if isinstance(properties.get(key), Mapping) else {})]
    if not judged:
        return ()
    words, numbers = content_tokens(known), _numbers(known)
    if any(_found(arguments[key], words, numbers) for key in judged):
        return ()
    return tuple(judged)


def unasked_options(arguments: Mapping[str, Any], parameters: Mapping[str, Any], known: str) -> tuple[str, ...]:
    """The optional arguments a call gives as words of its own: strings none of whose words is in ``known``."""
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    if any(isinstance(p, Mapping) and p.get(_PROGRAM) is True for p in properties.values()):
        return ()
    required = set(parameters.get("required") or ())
    words, numbers = content_tokens(known), _numbers(known)
    unasked = []
    for key, value in arguments.items():
        schema = properties.get(key)
        if key in required or not isinstance(schema, Mapping) or not _words_only(value) or CHOICES_KEY in schema:
            continue
        if _judged(key, value, schema) and not _found(value, words, numbers):
            unasked.append(key)
    return tuple(unasked)


def _words_only(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value))


def _judged(key: str, value: Any, schema: Mapping[str, Any]) -> bool:
    if value is None or value == "" or value == [] or value == {} or isinstance(value, bool) or key in _STEP_ARGUMENTS:
        return False
    if ({"enum", "const"} & set(schema) or schema.get("type") == "boolean" or schema.get(_PROGRAM) is True
            or ("default" in schema and schema["default"] == value)):
        return False
    if isinstance(value, str) and ("{{" in value or _DATE_OR_TIME.fullmatch(value.strip()) or _GLOB.search(value)):
        return False
    return not is_path_argument(key, dict(schema))


def _found(value: Any, words: set[str], numbers: set[float]) -> bool:
    """Whether any part of the value is in the known text."""
    return any(_leaf_found(leaf, words, numbers) for leaf in _leaves(value))


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif value is not None and not isinstance(value, bool):
        yield value


def _leaf_found(leaf: Any, words: set[str], numbers: set[float]) -> bool:
    if isinstance(leaf, (int, float)):
        return float(leaf) in numbers
    text = str(leaf)
    if _DATE_OR_TIME.fullmatch(text.strip()):
        return True
    return any(_word_found(word, words, numbers) for word in content_tokens(text))


def _word_found(word: str, words: set[str], numbers: set[float]) -> bool:
    if word in words:
        return True
    number = _as_number(word)
    if number is not None:
        return number in numbers
    return len(word) >= _STEM and any(len(w) >= _STEM and (w.startswith(word) or word.startswith(w)) for w in words)


def _numbers(text: str) -> set[float]:
    found: set[float] = set()
    for m in _NUMBER.finditer(text):
        raw = m.group(0)[: (m.start("percent") if m.group("percent") else m.start("scale") if m.group("scale") else m.end()) - m.start()].strip()
        # "5,10" is five and ten as much as five point ten: each reading counts.
        for n in (_as_number(raw), *(_as_number(part) for part in raw.split(",") if "," in raw)):
            if n is not None:
                found.add(n)
                if m.group("percent"):
                    found.add(n / 100)
                if m.group("scale"):
                    found.add(n * _SCALES[m.group("scale").lower()])
    found |= {_NUMBER_WORDS[w] for w in tokens(text) if w in _NUMBER_WORDS}
    return found


def _as_number(raw: str) -> float | None:
    raw = raw.strip()
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw):
        raw = raw.replace(",", "")
    else:
        raw = raw.replace(",", ".")
    try:
        return float(raw)
    except ValueError:
        return None
