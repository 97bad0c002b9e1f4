"""Is the model's text an answer? The checks that keep a non-answer from being
reported as ``answered``.

A small model, asked to answer, often writes something that is not one: an
empty reply, the name of a tool, the raw JSON a tool returned, a tool call
written out as text, or a lead-in that stops before saying anything ("The
tool returned:"). Each is recognised here by its form alone, never by
matching known requests or answers, and named by a reason the loop records
and sends back to the model once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from metnos.runtime.turn.grounding import leaves as _leaves
from metnos.runtime.turn.guards import DUPLICATE_READ
from metnos.runtime.step.text import content_tokens
from metnos.settings import i18n

EMPTY = "empty"
TOOL_NAME = "tool_name"
RAW_TOOL_OUTPUT = "raw_tool_output"
TOOL_CALL_AS_TEXT = "tool_call_as_text"
STUB = "stub"
INSTRUCTIONS_ECHOED = "instructions_echoed"
REPEATED = "repeated"

NAMES_NOTHING = "names_nothing"
# Why an answer is no answer, in the catalogue's words (``turn.answer.<problem>``): the model is told them, and the person.
REASONS: Mapping[str, str] = {problem: i18n.english(f"turn.answer.{problem}") for problem in (
    NAMES_NOTHING, EMPTY, TOOL_NAME, RAW_TOOL_OUTPUT, TOOL_CALL_AS_TEXT, STUB, INSTRUCTIONS_ECHOED, REPEATED)}
# An answer that is mostly a run of this many words or more of an instruction it was given.
_ECHO_RUN = 6
_ECHO_SHARE = 0.6
_LOWER_WORD = re.compile(r"[a-z0-9']+")

_FENCE = re.compile(r"\A```[a-zA-Z]*\s*\n?(?P<body>.*?)\n?\s*```\Z", re.DOTALL)
_TAGGED_CALL = re.compile(r"<\s*/?\s*(tool_call|function_call|tool_use)\b", re.IGNORECASE)
_CALL_SYNTAX = re.compile(r"\A\s*`?(?P<name>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)`?\s*\(")
# A lead-in: at most this many words, ending with a colon and nothing after it.
_STUB_WORDS = 12
# A short first line ending with a colon ("Step 2 returned:", "Here is the result:"), then the rest.
_LEAD_IN = re.compile(r"\A(?P<lead>[^\n]{1,120}):[ \t]*\n+(?P<rest>.*)\Z", re.DOTALL)
# The start of a tool's JSON result, even cut short (a reply that hit its token limit does not parse).
_RESULT_START = re.compile(r'\A(?:```[a-zA-Z]*\s*)?[\[{]\s*\{?\s*"(ok|entries|content|error|metadata|path)"\s*:')
# A result's envelope written without its braces: its "ok" key, then a JSON boolean ("ok false", "ok: true").
# The planner's grammar keeps an answer from opening with a brace, and the 0.5B, asked where the user is, wrote
# the envelope it had seen as words.
_BARE_ENVELOPE = re.compile(r'\A["\'`\s]*ok["\'`]?\s*[:=]?\s*(true|false)\b', re.IGNORECASE)


def _unfenced(text: str) -> str:
    m = _FENCE.match(text)
    return m.group("body").strip() if m else text


def _json_of(text: str) -> Any:
    body = _unfenced(text)
    if not body or body[0] not in "{[":
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


# A sentence or a line: what a runaway answer says again and again.
_PIECE = re.compile(r"(?<=[.!?])\s+|\n+")
_REPEAT_WORDS = 3
_REPEATS = 3


def repeats_itself(text: str, observations: list[Mapping[str, Any]]) -> bool:
    """``text`` says one sentence of at least three words three times or more, those make up half its
    sentences or more, and no observation holds it as often (the 0.5B wrote "The commit history was not
    run." until its token limit; the last three lines of a log may well be one error three times)."""
    pieces = [" ".join(p.split()).casefold() for p in _PIECE.split(text) if len(p.split()) >= _REPEAT_WORDS]
    if not pieces:
        return False
    top = max(set(pieces), key=pieces.count)
    said = pieces.count(top)
    if said < _REPEATS or 2 * said < len(pieces):
        return False
    held = sum(" ".join(leaf.split()).casefold().count(top) for obs in observations for leaf in _leaves(obs))
    return held < said


def _echoes(value: Any, observations: Iterable[Mapping[str, Any]]) -> bool:
    """``value`` is an observation, one of an observation's top-level values, or
    JSON made of an observation's values (the 1.5B answered ``{"content": "..."}``
    with the content a step returned)."""
    observations = list(observations)
    for obs in observations:
        if value == obs or (isinstance(value, (dict, list)) and value in obs.values()):
            return True
    said = [leaf for leaf in _leaves(value) if leaf.strip()] if isinstance(value, (dict, list)) else []
    held = [leaf for obs in observations for leaf in _leaves(obs)]
    return bool(said) and all(any(leaf.strip() in h for h in held) for leaf in said)


def _longest_run(a: list[str], b: list[str]) -> int:
    best = 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            if x == y:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


def echoes_instructions(text: str, instructions: Iterable[str]) -> bool:
    """``text`` is mostly one of the loop's own instructions, said back (the 0.5B
    answered a closed pipeline with ``{"message": "the pipeline is complete: answer
    the user now ..."}``)."""
    words = _LOWER_WORD.findall(text.casefold())[:400]
    if len(words) < _ECHO_RUN:
        return False
    for instruction in instructions:
        run = _longest_run(words, _LOWER_WORD.findall(instruction.casefold())[:400])
        if run >= _ECHO_RUN and run >= _ECHO_SHARE * len(words):
            return True
    return False


def instructions_in(observation: Mapping[str, Any]) -> list[str]:
    """What the runtime told the model in a step's place: a hint, a note, and the error of a read it
    intercepted, which is an instruction too ("answer from it, or pass it ... with from_step")."""
    said = [observation.get("hint"), observation.get("note")]
    if observation.get("error_class") == DUPLICATE_READ:
        said.append(observation.get("error"))
    return [text for text in said if isinstance(text, str) and text.strip()]


def answer_problem(text: str, tool_names: Collection[str],
                   observations: Iterable[Mapping[str, Any]] = (), instructions: Iterable[str] = (),
                   *, repeats: bool = False) -> str | None:
    """None when ``text`` reads as an answer, else the reason it does not.
    ``instructions``: what the loop itself told the model this turn; ``repeats``: an answer that is
    mostly one sentence said again and again (:func:`repeats_itself`) is none."""
    stripped = text.strip()
    if not stripped:
        return EMPTY
    if repeats and repeats_itself(stripped, list(observations)):
        return REPEATED
    if echoes_instructions(stripped, instructions):
        return INSTRUCTIONS_ECHOED
    bare = stripped.strip("`'\"*.!:; \n\t")
    if bare in tool_names or (bare.endswith("()") and bare[:-2] in tool_names):
        return TOOL_NAME
    if _TAGGED_CALL.search(stripped):
        return TOOL_CALL_AS_TEXT
    m = _CALL_SYNTAX.match(_unfenced(stripped))
    if m and m.group("name") in tool_names:
        return TOOL_CALL_AS_TEXT
    data = _json_of(stripped)
    if isinstance(data, dict) and "name" in data and ({"arguments", "parameters", "args"} & set(data)):
        return TOOL_CALL_AS_TEXT
    if isinstance(data, list) and data and all(isinstance(d, dict) and "name" in d and "arguments" in d for d in data):
        return TOOL_CALL_AS_TEXT
    if data is not None and (isinstance(data, dict) and ("ok" in data or "error" in data) or _echoes(data, list(observations))):
        return RAW_TOOL_OUTPUT
    if _BARE_ENVELOPE.match(_unfenced(stripped)):
        return RAW_TOOL_OUTPUT
    lead_in = _LEAD_IN.match(stripped)
    if lead_in and len(lead_in.group("lead").split()) <= _STUB_WORDS:
        rest = lead_in.group("rest").strip()
        if _RESULT_START.match(rest) or answer_problem(rest, tool_names, observations) == RAW_TOOL_OUTPUT:
            # A lead-in over a tool's result (the 1.5B copied the prompt's "Step 2 returned:" and the JSON after it).
            return RAW_TOOL_OUTPUT
    if stripped.endswith(":") and len(stripped.split()) <= _STUB_WORDS:
        return STUB
    return None


def names_none_of(text: str, observation: Mapping[str, Any]) -> bool:
    """``observation`` is a list of found items and ``text`` names none of them (by a name, a
    file's name, a title or a line it holds): "The markdown files in ~/notes were found."."""
    entries = observation.get("entries")
    if not isinstance(entries, list) or not entries:
        return False
    folded = text.casefold()
    for entry in entries:
        for value in _names_of(entry):
            if value.casefold() in folded:
                return False
    return True


# The fields by which an item is named, where it has any: not its type, size or dates.
_NAMING_FIELDS = ("name", "path", "title", "summary", "subject", "text", "line", "content", "from", "to", "address",
                  "email", "url", "item", "uid")


def _names_of(entry: Any) -> Iterable[str]:
    if isinstance(entry, str):
        yield entry.rsplit("/", 1)[-1]
        return
    if not isinstance(entry, Mapping):
        yield str(entry)
        return
    naming = {k: entry[k] for k in _NAMING_FIELDS if k in entry}
    for key, value in (naming or entry).items():
        if isinstance(value, str) and key != "path" and "\n" in value.strip():
            # A text names its item by any of its lines (an answer quotes one).
            yield from (line.strip() for line in value.splitlines() if len(line.strip()) > 2)
        elif isinstance(value, str) and 2 < len(value.strip()) <= 200:
            yield value.rsplit("/", 1)[-1] if key == "path" else value.strip()
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and key not in ("size", "mtime", "number", "line"):
            yield str(value)


def grounded_in(text: str, observations: Iterable[Mapping[str, Any]]) -> bool:
    """The answer shares at least one word or number with one of ``observations``:
    a sign that it uses what those steps produced."""
    words = content_tokens(text)
    if not words:
        return False
    return any(words & content_tokens(" ".join(_leaves(obs))) for obs in observations)


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*")


def _numbers(text: str) -> set[float]:
    found = set()
    for raw in _NUMBER.findall(text):
        plain = raw.replace(",", "") if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw) else raw.replace(",", ".")
        try:
            found.add(float(plain))
        except ValueError:
            continue
    return found


def figures_from(text: str, observations: Iterable[Mapping[str, Any]]) -> bool:
    """The answer gives at least one number, and each is a number of ``observations``
    (in a value or inside a text value): a figure taken from the data, not made up."""
    said = _numbers(text)
    if not said:
        return False
    known: set[float] = set()
    for obs in observations:
        for leaf in _leaves(obs):
            known |= _numbers(leaf)
    return said <= known


# Words by which a request asks for a figure worked out from data (a total, a count, the
# largest): the data itself, handed back, does not answer it.
_FIGURE = re.compile(r"\b(total|sum|average|mean|count|how many|how much|number of|largest|biggest|smallest|"
                     r"highest|lowest|maximum|minimum|most|least|fewest|cheapest|priciest|most expensive)\b", re.IGNORECASE)


def asks_for_a_figure(request_text: str) -> bool:
    return _FIGURE.search(request_text) is not None


def is_a_figure(observation: Mapping[str, Any]) -> bool:
    """A step's result that is one number (compute_entries' ``content``)."""
    content = observation.get("content")
    return isinstance(content, (int, float)) and not isinstance(content, bool)


# The model saying the request was not done (en, it): "could not be done", "I was unable to", "non è stato possibile".
_ADMISSION = re.compile(r"\b(?:could\s*n[o']?t|cannot|can\s*not|can't|(?:was|were|am|is|are)\s*(?:not|n't)\s+able\s+to|unable\s+to"
                        r"|failed\s+to|impossible\s+to|non\s+(?:è\s+stato\s+possibile|posso|riesco|sono\s+riuscit[oa]|ho\s+potuto))\b",
                        re.IGNORECASE)
_CLAUSE_END = re.compile(r"(?<=[.!?;:])\s+|\n")
_IN_QUOTES = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|«[^»\n]*»|`[^`\n]*`")


def admitted_failure(text: str, observations: Iterable[Mapping[str, Any]]) -> str | None:
    """The clause in which the answer says what was asked could not be done, or None. A
    clause the answer quotes from a result ("I cannot come on Friday", a line of a note) says
    nothing about the turn."""
    quoted = "\n".join(" ".join(leaf.split()).casefold() for obs in observations for leaf in _leaves(obs))
    for clause in _CLAUSE_END.split(_IN_QUOTES.sub(" ", text)):
        said = " ".join(clause.split()).strip(" .!?;\"'")
        if _ADMISSION.search(said) and said.casefold() not in quoted:
            return said
    return None
