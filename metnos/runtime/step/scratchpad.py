"""The scratchpad for large observations (seeds/002 ch. 8).

An observation whose canonical JSON (sorted keys, compact) is larger than
the threshold (4096 bytes by default) is *spilled*: :func:`spill` returns
the bytes to store under a ``scratchpad_id`` and the short observation that
goes into the LLM history instead. Storage is behind the
:class:`ScratchpadStore` port; :class:`InMemoryScratchpadStore` is the
reference implementation.

Readings where the spec leaves room:

* The id is the first 16 hex digits of blake3 over turn id, step number and
  the canonical bytes: deterministic (replay gives the same id), distinct
  per turn and step, and no random source is needed.
* ``kind`` is ``text`` when the observation has a string ``content`` (the
  summary previews that text), ``list`` when it carries a list to pipe (the
  summary previews the list's JSON and ``count``, ``list_field`` and
  ``schema`` — the sorted keys of its object items — are added, which is
  what ``from_step`` consumers need to know), else ``json`` (the summary
  previews the whole observation's JSON).
* The summary is the first 500 characters, a marker
  ``[... N characters omitted...]`` on its own paragraph, and the last 500
  characters; a text of at most 1,000 characters is shown whole.
* ``metadata`` is carried over when its JSON is at most 1,024 bytes, else
  replaced by ``{"omitted": true, "size_bytes": n}``. ``ok``, ``error`` and
  ``error_class`` are always carried over so a large failure still reads
  as a failure.
* ``scratchpad_read`` modes: ``range`` (offset/length in characters),
  ``head``, ``tail``, ``grep`` (case-insensitive substring, matching lines
  with their 1-based numbers) and ``entries`` (a slice of a spilled list).
  For a ``text`` spill the characters are those of ``content``; otherwise
  of the observation's JSON indented by two spaces, so ``grep`` finds one
  field per line. Every answer is bounded (3,000 characters of text, 20
  grep lines, entries up to about 3,000 bytes) so that a read never needs
  spilling itself. Bad input is answered with ``ok: false`` and an
  ``error_class``, as an observation the LLM can correct, not an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import blake3
import orjson

from metnos.runtime.step.errors import TurnError
from metnos.runtime.step.piping import PipingError, list_field_of

DEFAULT_THRESHOLD_BYTES = 4096
HEAD_CHARS = 500
TAIL_CHARS = 500
METADATA_MAX_BYTES = 1024
SCHEMA_MAX_KEYS = 50
READ_MAX_CHARS = 3000
READ_DEFAULT_CHARS = 2000
GREP_MAX_MATCHES = 20
GREP_LINE_CHARS = 150
ENTRIES_MAX_BYTES = 3000
ENTRIES_DEFAULT = 10
READ_MODES = ("range", "head", "tail", "grep", "entries")

SCRATCHPAD_READ_TOOL: Mapping[str, Any] = {
    "name": "scratchpad_read",
    "description": (
        "Read more of a large observation that was saved to the scratchpad. "
        "mode=range reads `length` characters from `offset`; head/tail read the start/end; "
        "grep returns the lines containing `pattern`; entries returns items of a saved list "
        "from index `offset`."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "scratchpad_id": {"type": "string"},
            "mode": {"type": "string", "enum": list(READ_MODES), "default": "range"},
            "offset": {"type": "integer", "minimum": 0, "default": 0},
            "length": {"type": "integer", "minimum": 1, "maximum": READ_MAX_CHARS},
            "pattern": {"type": "string", "minLength": 1},
        },
        "required": ["scratchpad_id"],
        "additionalProperties": False,
    },
}


class ScratchpadError(TurnError):
    pass


class ScratchpadStore(Protocol):
    """Where spilled observations live. Content under an id never changes."""

    def put(self, scratchpad_id: str, payload: bytes) -> None: ...

    def get(self, scratchpad_id: str) -> bytes | None: ...


class InMemoryScratchpadStore:
    def __init__(self) -> None:
        self._items: dict[str, bytes] = {}

    def put(self, scratchpad_id: str, payload: bytes) -> None:
        old = self._items.get(scratchpad_id)
        if old is not None and old != payload:
            raise ScratchpadError("scratchpad_id_clash",
                                  f"scratchpad id {scratchpad_id} already holds other content",
                                  {"scratchpad_id": scratchpad_id})
        self._items[scratchpad_id] = bytes(payload)

    def get(self, scratchpad_id: str) -> bytes | None:
        return self._items.get(scratchpad_id)

    def __len__(self) -> int:
        return len(self._items)


def canonical_json(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:
        raise ScratchpadError("not_json", f"observation is not JSON-serialisable: {exc}", {}) from None


def preview(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """First ``head`` + omitted-marker + last ``tail`` characters."""
    if head < 0 or tail < 0:
        raise ValueError("head and tail must be >= 0")
    if len(text) <= head + tail:
        return text
    omitted = len(text) - head - tail
    end = text[len(text) - tail:] if tail else ""
    return f"{text[:head]}\n\n[... {omitted} characters omitted...]\n\n{end}"


def scratchpad_id_for(turn_id: str, step: int, payload: bytes) -> str:
    h = blake3.blake3()
    h.update(turn_id.encode())
    h.update(b"\0")
    h.update(str(step).encode())
    h.update(b"\0")
    h.update(payload)
    return h.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class SpillDecision:
    spilled: bool
    history_observation: Mapping[str, Any]  # what the LLM sees
    scratchpad_id: str | None = None
    payload: bytes | None = None  # what to store under scratchpad_id
    size_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        # The event records the decision, not the (already recorded) payload.
        return {"spilled": self.spilled, "scratchpad_id": self.scratchpad_id,
                "size_bytes": self.size_bytes}


def _list_field(observation: Mapping[str, Any]) -> str | None:
    try:
        return list_field_of(observation, 0)
    except PipingError:
        return None


def _schema(items: list[Any]) -> list[str]:
    keys: set[str] = set()
    for item in items:
        if isinstance(item, Mapping):
            keys.update(map(str, item))
    return sorted(keys)[:SCHEMA_MAX_KEYS]


def text_view(observation: Mapping[str, Any]) -> str:
    content = observation.get("content")
    if isinstance(content, str):
        return content
    return orjson.dumps(observation, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode()


def spill(observation: Mapping[str, Any], *, turn_id: str, step: int,
          threshold_bytes: int = DEFAULT_THRESHOLD_BYTES, head: int = HEAD_CHARS,
          tail: int = TAIL_CHARS) -> SpillDecision:
    if not isinstance(observation, Mapping):
        raise ScratchpadError("not_an_object", "an observation must be a JSON object", {})
    payload = canonical_json(observation)
    size = len(payload)
    if size <= threshold_bytes:
        return SpillDecision(False, observation, size_bytes=size)
    sid = scratchpad_id_for(turn_id, step, payload)
    short: dict[str, Any] = {"ok": observation.get("ok", True), "scratchpad_id": sid,
                             "size_bytes": size}
    for key in ("error", "error_class"):
        if key in observation:
            short[key] = observation[key] if len(canonical_json(observation[key])) <= 512 \
                else preview(str(observation[key]), 250, 250)
    content = observation.get("content")
    lf = None if isinstance(content, str) else _list_field(observation)
    if isinstance(content, str):
        short["kind"] = "text"
        short["summary"] = preview(content, head, tail)
    elif lf is not None:
        items = observation[lf]
        short["kind"] = "list"
        short["list_field"] = lf
        short["count"] = len(items)
        short["schema"] = _schema(items)
        short["summary"] = preview(canonical_json(items).decode(), head, tail)
    else:
        short["kind"] = "json"
        short["summary"] = preview(payload.decode(), head, tail)
    if "metadata" in observation:
        meta_bytes = len(canonical_json(observation["metadata"]))
        short["metadata"] = (observation["metadata"] if meta_bytes <= METADATA_MAX_BYTES
                             else {"omitted": True, "size_bytes": meta_bytes})
    return SpillDecision(True, short, sid, payload, size)


def _error(sid: Any, error_class: str, message: str) -> dict[str, Any]:
    return {"ok": False, "scratchpad_id": sid, "error_class": error_class, "error": message}


def _int_arg(args: Mapping[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ScratchpadError("bad_argument", f"{key} must be an integer in [{lo}, {hi}]", {key: repr(value)})
    return value


def scratchpad_read(store: ScratchpadStore, args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``scratchpad_read`` builtin: an observation, never an exception."""
    sid = args.get("scratchpad_id") if isinstance(args, Mapping) else None
    if not isinstance(args, Mapping) or not isinstance(sid, str) or not sid:
        return _error(sid, "bad_argument", "scratchpad_id is required")
    unknown = sorted(set(args) - set(SCRATCHPAD_READ_TOOL["parameters"]["properties"]))
    if unknown:
        return _error(sid, "bad_argument", f"unknown arguments: {', '.join(map(str, unknown))}")
    mode = args.get("mode", "range")
    if mode not in READ_MODES:
        return _error(sid, "bad_argument", f"mode must be one of {', '.join(READ_MODES)}")
    payload = store.get(sid)
    if payload is None:
        return _error(sid, "unknown_scratchpad_id", f"no scratchpad entry {sid} in this turn")
    observation = orjson.loads(payload)
    try:
        if mode == "grep":
            return _grep(sid, observation, args)
        if mode == "entries":
            return _entries(sid, observation, args)
        return _range(sid, observation, args, mode)
    except ScratchpadError as exc:
        return _error(sid, "bad_argument", exc.message)


def _range(sid: str, observation: Mapping[str, Any], args: Mapping[str, Any], mode: str) -> dict[str, Any]:
    text = text_view(observation)
    total = len(text)
    length = _int_arg(args, "length", READ_DEFAULT_CHARS, 1, READ_MAX_CHARS)
    if mode == "head":
        offset = 0
    elif mode == "tail":
        offset = max(0, total - length)
    else:
        offset = _int_arg(args, "offset", 0, 0, max(total, 0))
    chunk = text[offset:offset + length]
    end = offset + len(chunk)
    return {"ok": True, "scratchpad_id": sid, "mode": mode, "offset": offset, "length": len(chunk),
            "total_chars": total, "has_more": end < total, "next_offset": end if end < total else None,
            "content": chunk}


def _grep(sid: str, observation: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ScratchpadError("bad_argument", "grep needs a non-empty pattern", {})
    needle = pattern.casefold()
    matches = []
    total = 0
    for number, line in enumerate(text_view(observation).splitlines(), start=1):
        if needle in line.casefold():
            total += 1
            if len(matches) < GREP_MAX_MATCHES:
                matches.append({"line": number, "text": line[:GREP_LINE_CHARS]})
    return {"ok": True, "scratchpad_id": sid, "mode": "grep", "pattern": pattern,
            "total_matches": total, "matches": matches, "truncated": total > len(matches)}


def _entries(sid: str, observation: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    lf = _list_field(observation)
    if lf is None:
        raise ScratchpadError("bad_argument", "this scratchpad entry holds no list; use range or grep", {})
    items = observation[lf]
    offset = _int_arg(args, "offset", 0, 0, max(len(items), 0))
    length = _int_arg(args, "length", ENTRIES_DEFAULT, 1, READ_MAX_CHARS)
    out: list[Any] = []
    used = 0
    for item in items[offset:offset + length]:
        size = len(canonical_json(item)) + 1
        if out and used + size > ENTRIES_MAX_BYTES:
            break
        out.append(item)
        used += size
    end = offset + len(out)
    return {"ok": True, "scratchpad_id": sid, "mode": "entries", "list_field": lf,
            "offset": offset, "count": len(out), "total": len(items),
            "has_more": end < len(items), "next_offset": end if end < len(items) else None,
            "entries": out}
