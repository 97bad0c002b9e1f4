"""Where each argument of a step came from, and which of those origins may choose a side effect's target.

An argument's value came from one of: the user's request (a span of its text), a
configured setting, the user's answer to a question of the turn, an earlier step's
output (which step, which field, and what that step read: a page, a mail, a file,
a folder's listing, an MCP server's result), or none of these, the model's own text.
The runtime works out each step's *source* (what its output holds) and hands the
values it saw; this module matches the arguments against them. Pure: no I/O, no clock.

Matching is by value, as grounding matches an answer: a string equal to a leaf of
an earlier output, or found inside one of its text leaves (a page that says "send
it to x@example.com"), or in the request, compared without case; a path also in
its ``~`` form, and a full path by its file name when the request names that file alone
("todo.md"). The request wins over a step (what the user wrote is the user's,
wherever else it appears); among steps, the least trusted wins, so a value cannot be
laundered through a harmless output that also holds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus, urlsplit

# Where a value came from.
REQUEST = "request"
SETTING = "setting"
DIALOG = "dialog"
STEP = "step"
MODEL = "model"

# What a step's output holds (its source).
WEB = "web"
MAIL = "mail"
MCP = "mcp"
CALENDAR = "calendar"
CONTACTS = "contacts"
FILE = "file"              # the text of a file the request did not name
NAMED_FILE = "named_file"  # the text of a file the request named, to read (not to obey)
INSTRUCTIONS = "instructions"  # a file the request named as instructions to follow
NAMED_FOLDER = "named_folder"  # a listing of a folder the request named
FOLDER = "folder"          # a listing of another folder
ANSWER = "answer"          # the user's answer to a question of the turn
LOCAL = "local"            # worked out on the machine from nothing read (the clock, a computation)
EARLIER = "earlier_turn"   # what an earlier turn of the conversation returned or answered (shown again, never obeyed)

# Content someone other than the user wrote: it may inform, never choose a target.
UNTRUSTED = frozenset({WEB, MAIL, MCP, CALENDAR, FILE, NAMED_FILE, EARLIER})
# Content that makes a target the model wrote itself suspect (it may be that content paraphrased). A file
# the request named is data the user chose to have worked on: what it says is still untrusted, matched
# as such, but the model's own words after reading it are not.
TAINTING = UNTRUSTED - {NAMED_FILE}
# Outputs that carry a file's text: sent where the request did not say, that is exfiltration.
# What an earlier turn read may have been a file: it counts as one.
FILE_CONTENT = frozenset({FILE, NAMED_FILE, INSTRUCTIONS, EARLIER})
# Less trusted first: a value several outputs hold is taken from the first of these.
_DISTRUST = (EARLIER, WEB, MAIL, MCP, CALENDAR, FILE, NAMED_FILE, FOLDER, CONTACTS, NAMED_FOLDER, INSTRUCTIONS, ANSWER, LOCAL)

# The role of a target argument of a side effect.
RECIPIENT = "recipient"
PATH = "path"
URL = "url"
COMMAND = "command"
# A value an MCP server's side effect takes (an amount, a password, an id, a date): the server's schema does not say
# which of its arguments are data, so a token content picked steers it as much as a target does.
VALUE = "value"
# Which sources may name a target of each role besides the request, a setting and the user's answer.
_TRUSTED_FOR = {
    RECIPIENT: frozenset({CONTACTS, INSTRUCTIONS, ANSWER}),
    PATH: frozenset({NAMED_FOLDER, FOLDER, INSTRUCTIONS, ANSWER, LOCAL}),
    URL: frozenset({INSTRUCTIONS, ANSWER}),
    COMMAND: frozenset({INSTRUCTIONS, ANSWER}),
    VALUE: frozenset({INSTRUCTIONS, ANSWER, LOCAL, CONTACTS, NAMED_FOLDER, FOLDER}),
}
_ROLE_WORDS = {RECIPIENT: "the recipient", PATH: "the path", URL: "the URL", COMMAND: "the command"}
_SOURCE_WORDS = {
    WEB: "the page fetched at step {n}", MAIL: "the mail read at step {n}", MCP: "the MCP server's result at step {n}",
    CALENDAR: "the calendar read at step {n}", FILE: "the file read at step {n}", NAMED_FILE: "the file read at step {n}",
    INSTRUCTIONS: "the instructions read at step {n}", NAMED_FOLDER: "the folder listed at step {n}",
    FOLDER: "the folder listed at step {n}", CONTACTS: "the contacts read at step {n}", ANSWER: "your answer at step {n}",
    LOCAL: "step {n}", EARLIER: "an earlier turn of this conversation",
}
# Words with which a request names a file as instructions to follow, not data to read.
_INSTRUCTION_WORDS = re.compile(r"\b(instructions?|do what\b[^\n]{0,80}?\bsays|follow (it|them|the steps|what)|as (it|the file) says)\b",
                                re.IGNORECASE)
_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")
# Shorter strings ("a", "to", "10") are found everywhere: matched only as a whole leaf.
MIN_INSIDE = 4
# A line of a file found in a URL is the file's text on its way out from this length on.
MIN_CARRIED = 8
# At most this many argument leaves are traced a step (a list of 10,000 paths is one piped argument anyway).
MAX_TRACED = 64


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where one argument's value came from: ``kind`` one of request, setting, dialog, step, model."""

    kind: str
    span: tuple[int, int] | None = None  # request: where in its text
    setting: str | None = None           # setting: which
    step: int | None = None              # step: which step, which field of its output, and what that step read
    field: str | None = None
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"from": self.kind}
        if self.span is not None:
            d["span"] = list(self.span)
        if self.setting is not None:
            d["setting"] = self.setting
        if self.step is not None:
            d.update(step=self.step, field=self.field, source=self.source)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Provenance:
        span = d.get("span")
        return cls(d["from"], tuple(span) if span else None, d.get("setting"), d.get("step"), d.get("field"), d.get("source"))

    def words(self) -> str:
        """How a person is told where the value came from."""
        if self.kind == REQUEST:
            return "your request"
        if self.kind == SETTING:
            return f"the setting {self.setting}"
        if self.kind == DIALOG:
            return "your answer"
        if self.kind == STEP:
            return _SOURCE_WORDS.get(self.source or LOCAL, "step {n}").format(n=self.step)
        return "the model's own text"


@dataclass(frozen=True, slots=True)
class Seen:
    """An earlier step's output as the matching sees it: its number, its source, its full output."""

    step: int
    source: str
    output: Any


def least_trusted(sources: Iterable[str]) -> str | None:
    found = set(sources)
    return next((s for s in _DISTRUST if s in found), None)


def names_as_instructions(request: str) -> bool:
    """Whether the request tells Metnos to do what a file says (a file named so is the user's voice)."""
    return bool(_INSTRUCTION_WORDS.search(request))


def _forms(value: str, home: str) -> list[str]:
    """A value and, for a path, its other spelling (``~/x`` and ``/home/u/x``)."""
    forms = [value]
    if home:
        if value == "~" or value.startswith("~/"):
            forms.append(home + value[1:])
        elif value == home or value.startswith(home.rstrip("/") + "/"):
            forms.append("~" + value[len(home.rstrip("/")):])
    return [f for f in forms if f]


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}.{i}" if path else str(i))
    else:
        yield path, value


def _in_request(value: str, request: str, home: str) -> tuple[int, int] | None:
    folded = request.casefold()
    for form in _forms(value.strip(), home):
        at = folded.find(form.casefold())
        if at >= 0:
            return (at, at + len(form))
    # A path the model wrote out in full for a file the request names by its name ("todo.md").
    name = value.strip().rstrip("/").rsplit("/", 1)[-1]
    if value.strip().startswith(("/", "~")) and len(name) >= MIN_INSIDE and "." in name.strip("."):
        found = re.search(rf"(?<![\w.~/-]){re.escape(name.casefold())}(?![\w/-])", folded)
        if found:
            return found.span()
    return None


def _in_output(value: Any, output: Any, home: str) -> str | None:
    """The field of ``output`` that holds ``value`` (equal, or inside a text of it), or None."""
    if isinstance(value, str):
        forms = [f.casefold() for f in _forms(value.strip(), home)]
        inside = len(value.strip()) >= MIN_INSIDE
        for field, leaf in _leaves(output):
            if isinstance(leaf, str):
                text = leaf.casefold()
                if any(text == f or (inside and f in text) for f in forms):
                    return field
        return None
    if isinstance(value, bool) or value is None:
        return None
    for field, leaf in _leaves(output):
        if not isinstance(leaf, bool) and leaf == value:
            return field
    return None


def classify(value: Any, *, request: str, settings: Mapping[str, Any], seen: Sequence[Seen], home: str = "") -> Provenance:
    """Where ``value`` came from (module docstring): the request, a setting, an earlier output, else the model."""
    if isinstance(value, str) and value.strip():
        span = _in_request(value, request, home)
        if span is not None:
            return Provenance(REQUEST, span=span)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and re.search(rf"(?<![\d.]){re.escape(str(value))}(?![\d])", request):
        at = request.find(str(value))
        return Provenance(REQUEST, span=(at, at + len(str(value))))
    for name, configured in settings.items():
        if isinstance(value, str) and value.strip() and isinstance(configured, str) and value.strip().casefold() == configured.casefold():
            return Provenance(SETTING, setting=name)
    found = [(s, f) for s in seen if (f := _in_output(value, s.output, home)) is not None]
    if found:
        worst = least_trusted(s.source for s, _ in found)
        step, field = next((s, f) for s, f in found if s.source == worst)
        return Provenance(STEP, step=step.step, field=field, source=step.source)
    return Provenance(MODEL)


def trace(args: Mapping[str, Any], *, request: str, settings: Mapping[str, Any], seen: Sequence[Seen],
          piped: Mapping[str, Provenance], answered: Mapping[str, Provenance], home: str = "") -> dict[str, Provenance]:
    """The provenance of each argument of a call, by its dotted path (``messages.0.to_user``).

    ``piped``: arguments the runtime filled from an earlier step (``from_step``, ``{{stepN.field}}``),
    each already traced, their leaves with them; ``answered``: arguments the user's answer or the
    request's words completed. At most :data:`MAX_TRACED` leaves are traced."""
    out: dict[str, Provenance] = {}
    for path, value in _leaves(args):
        if len(out) >= MAX_TRACED:
            break
        owner = next((p for p in (*piped, *answered) if path == p or path.startswith(p + ".")), None)
        if owner is not None:
            out.setdefault(owner, piped.get(owner) or answered[owner])
            continue
        if isinstance(value, bool) or value is None:
            continue
        out[path] = classify(value, request=request, settings=settings, seen=seen, home=home)
    return out


# The policy ---------------------------------------------------------------
def untrusted_content_read(seen: Sequence[Seen]) -> Seen | None:
    """The first earlier step whose output is content someone other than the user wrote, on a source the request did not name."""
    return next((s for s in seen if s.source in TAINTING), None)


def target_origin(role: str, provenance: Provenance, *, tainted_by: Seen | None, argument: str = "") -> str | None:
    """Why a side effect's target of ``role`` may not be chosen as it was, in words (None: it may).

    A target chosen by untrusted content is one; so is a target the model wrote itself once the
    turn has read untrusted content (``tainted_by``), since it may be that content paraphrased."""
    what = f"the value of {argument}" if role == VALUE else _ROLE_WORDS.get(role, "the target")
    if provenance.kind == STEP and provenance.source not in _TRUSTED_FOR.get(role, frozenset()):
        return f"{what} came from {provenance.words()}"
    if provenance.kind == MODEL and tainted_by is not None:
        return (f"{what} is in neither your request nor your settings: the model wrote it after reading "
                f"{Provenance(STEP, step=tainted_by.step, source=tainted_by.source).words()}")
    return None


def carries_file_or_secret(provenance: Mapping[str, Provenance], values: Mapping[str, Any]) -> str | None:
    """What of the call is a file's content or a secret, in words (None: nothing)."""
    for path, p in provenance.items():
        if p.kind == STEP and p.source in FILE_CONTENT:
            return f"{path} holds the content of {p.words()}"
    for path, value in values.items():
        if isinstance(value, str) and _PRIVATE_KEY.search(value):
            return f"{path} holds a private key"
    return None


def carried_in_url(url: str, seen: Sequence[Seen], *, request: str, settings: Mapping[str, Any]) -> str | None:
    """What of a file's text or a secret the URL carries to a server the user did not name, in words (None: nothing).

    A URL is a message to its server: its path and query can carry what the turn read. The server
    (scheme, host and port) the request or a setting names is the user's; a URL found as it is in
    the text it came from was read there, not built from it; a piece shorter than
    :data:`MIN_CARRIED` is a coincidence, not the file."""
    parts = urlsplit(url.strip())
    server = parts.netloc.casefold()
    if not server or server in request.casefold() or any(isinstance(v, str) and server in v.casefold() for v in settings.values()):
        return None
    decoded = unquote_plus(url)
    if _PRIVATE_KEY.search(decoded):
        return "a private key"
    folded = decoded.casefold()
    for s in seen:
        if s.source not in FILE_CONTENT:
            continue
        texts = [leaf for _, leaf in _leaves(s.output) if isinstance(leaf, str)]
        if any(url.strip() in t or decoded.strip() in t for t in texts):
            continue
        for text in texts:
            for piece in text.splitlines():
                piece = piece.strip()
                if len(piece) >= MIN_CARRIED and piece.casefold() in folded:
                    return f"text of {Provenance(STEP, step=s.step, source=s.source).words()} ({piece[:40]!r})"
    return None


# A piece of an output that is that output's own, not a common word: a number with letters or digits around it (an id,
# a passport, an account, a phone) or a line long enough not to be a coincidence.
_DISTINCTIVE = re.compile(r"[\w][\w\-/.+]{3,}[\w]")
MIN_DIGITS = 3


def piece_carried(values: Mapping[str, Any], output: Any, *, known: Sequence[str]) -> tuple[str, str] | None:
    """(argument path, the piece) of ``output`` a call's ``values`` carry that no text in ``known`` (the request, what
    the other steps returned) holds: an id-like run with digits, or a line of :data:`MIN_CARRIED` characters or more."""
    texts = [leaf for _, leaf in _leaves(output) if isinstance(leaf, str)]
    pieces = {m.group(0) for t in texts for m in _DISTINCTIVE.finditer(t) if sum(c.isdigit() for c in m.group(0)) >= MIN_DIGITS}
    pieces |= {line.strip() for t in texts for line in t.splitlines() if len(line.strip()) >= MIN_CARRIED}
    folded_known = [k.casefold() for k in known]
    for path, value in values.items():
        if not isinstance(value, str):
            continue
        folded = value.casefold()
        for piece in sorted(pieces, key=len, reverse=True):
            p = piece.casefold()
            if p in folded and not any(p in k for k in folded_known):
                return path, piece
    return None


def named_by_user(provenance: Provenance) -> bool:
    """The request, a setting or the user's answer named it (a destination the user chose)."""
    return provenance.kind in (REQUEST, SETTING, DIALOG) or provenance.kind == STEP and provenance.source in (CONTACTS, ANSWER, INSTRUCTIONS)


def is_token(value: Any) -> bool:
    """A value that picks rather than says: a number, a flag, or one word (an id, a password, a date, an amount).

    Prose (text with spaces) fills a slot the user asked to fill, a message's body say; a token decides what happens."""
    if isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and 0 < len(value.strip()) <= 200 and not any(c.isspace() for c in value.strip())


def leaves(value: Any) -> dict[str, Any]:
    """Every leaf of an argument tree by its dotted path."""
    return dict(_leaves(value))


def described(recorded: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """A step's recorded provenance as (argument, where it came from in words), for ``turns show`` and the dashboard."""
    out = []
    for arg, d in recorded.items():
        p = Provenance.from_json(d)
        words = p.words()
        if p.kind == STEP and p.field:
            words += f" ({p.field})"
        elif p.kind == REQUEST and p.span:
            words += f" (characters {p.span[0]}-{p.span[1]})"
        out.append((arg, words))
    return out
