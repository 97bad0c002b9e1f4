"""Arguments a list operator was called without, completed from the request's own words.

A small model calls ``compute_entries(op="sum", from_step=1)`` for "the total
of the amount column", or ``sort_entries(field="size")`` for "the largest
file", and leaves out the argument that carries the request's meaning: the
field, the order. Told so, it repeats the same call. The request says it, so
the loop fills it in, by rules, only where the model left it out, and says so
in the step's record (``completed``):

* ``field``: a field of the piped entries that the request names as a word
  ("amount"), or, for a file list, the field a size or time word points at
  ("largest" means size, "newest" means modified); only when exactly one
  field fits;
* ``order``: ``desc`` when the request asks for the most of something
  ("largest", "newest", "top") and never for the least;
* a path written without its ``~/`` ("essays/intro.txt" for the request's
  "~/essays/intro.txt"): the 0.5B drops it, the policy refuses a relative path,
  and the model writes the same path again. Only a path the request names
  exactly is completed; any other relative path is still refused;
* an optional argument written out blank (``""``, ``[]``, ``{}``, ``null``)
  where the schema refuses a blank one is left out: the 1.5B, planning
  online, wrote every optional argument of move_files and sent
  ``dest_dir: ""`` beside the ``moves`` it meant. A blank means the default;
  this applies only when leaving the blanks out makes the call valid, and
  the step's record names them (``completed["dropped"]``);
* a new name for a record that exists (a field the schema marks ``"x-renames": true``, such
  as set_events' ``summary``, in an item that names its record by ``uid`` or ``find``) is
  taken only in the request's own words: the 1.5B moved an appointment and set its title to
  the request restated ("Move <the appointment>"). Any other value is left out, so the
  record keeps its name, and the step's record says so (``completed["kept_name"]``);
* ``when``, for a read that takes the day asked about in the user's words: the one day the
  request names ("Thursday afternoon", "domani"), when the call gives no day at all. Asked on a
  Thursday whether Thursday afternoon was free, the 0.5B read the calendar without a day, got
  the week from today, which stops short of the Thursday asked about, and answered with it.

Pure: the same request and entries give the same completion, so a replay
recomputes it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from metnos.runtime.step.intent import named_targets

_WORD = re.compile(r"[a-z0-9_]+")
_MOST = frozenset({"largest", "biggest", "highest", "most", "newest", "latest", "recent", "top", "maximum", "max",
                   "heaviest", "longest", "greatest"})
_LEAST = frozenset({"smallest", "lowest", "least", "oldest", "earliest", "minimum", "min", "shortest", "lightest",
                    "cheapest", "fewest"})
# Words that point at a field of a file list (find_files' entries).
_FIELD_WORDS = {"size": ("largest", "biggest", "smallest", "size", "heaviest", "lightest", "bytes"),
                "modified": ("newest", "latest", "recent", "recently", "oldest", "modified", "earliest")}


def complete_arguments(args: Mapping[str, Any], properties: Mapping[str, Any], entries: Sequence[Any] | None,
                       request_text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``args`` with what the request supplies added, and what was added (argument -> value)."""
    words = set(_WORD.findall(request_text.casefold()))
    out, added = dict(args), {}
    field_schema = properties.get("field")
    # A field with a default (filter_entries' "name") is the executor's own choice to make.
    if isinstance(field_schema, Mapping) and "default" not in field_schema and not out.get("field") and entries:
        field = _named_field(entries, words)
        if field is not None:
            out["field"] = added["field"] = field
    order = properties.get("order")
    if isinstance(order, Mapping) and "desc" in (order.get("enum") or ()) and "order" not in out:
        if words & _MOST and not words & _LEAST:
            out["order"] = added["order"] = "desc"
    return out, added


SLICE_ARGUMENTS = ("first", "last", "start", "end")


def complete_exact_ask(args: Mapping[str, Any], properties: Mapping[str, Any], ask: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``args`` with the slice the request asks for exactly ("the last three lines": ``last`` 3) when the
    call gives none, and the switch for items when the request asks for items; what was added."""
    out, added = dict(args), {}
    if ask is None:
        return out, added
    if ask.count is not None and ask.end in properties and not any(a in out for a in SLICE_ARGUMENTS if a in properties):
        out[ask.end] = added[ask.end] = ask.count
    if ask.what != "lines" and ask.what in properties and ask.what not in out:
        out[ask.what] = added[ask.what] = True
    return out, added


def _named_field(entries: Sequence[Any], words: set[str]) -> str | None:
    fields: dict[str, None] = {}
    for e in entries[:200]:
        if isinstance(e, Mapping):
            for k, v in e.items():
                if isinstance(k, str) and v is not None:
                    fields.setdefault(k, None)
    named = [f for f in fields if f.casefold() in words]
    if len(named) == 1:
        return named[0]
    pointed = [f for f, cues in _FIELD_WORDS.items() if f in fields and words.intersection(cues)]
    return pointed[0] if len(pointed) == 1 and not named else None


def complete_paths(args: Mapping[str, Any], paths: Sequence[tuple[str, str]], request_text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``args`` with each relative path (at its JSON pointer in ``paths``) that
    is a path the request names without its ``~/`` written as the request
    writes it, and what was completed (pointer -> path)."""
    named = named_targets(request_text)
    home_paths = {p[2:].rstrip("/"): p.rstrip("/") for p in (*named.files, *named.folders) if p.startswith("~/")}
    out: dict[str, Any] = dict(args)
    added: dict[str, Any] = {}
    for pointer, value in paths:
        bare = value.strip()
        bare = bare[2:] if bare.startswith("./") else bare
        if bare.startswith(("/", "~")) or bare.rstrip("/") not in home_paths:
            continue
        if not added:
            out = copy.deepcopy(out)
        _put(out, pointer, home_paths[bare.rstrip("/")])
        added[pointer] = home_paths[bare.rstrip("/")]
    return out, added


def _put(document: Any, pointer: str, value: str) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    node = document
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def _blank(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def without_blank_optionals(args: Mapping[str, Any], schema: Mapping[str, Any],
                            problems: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """``args`` without the optional arguments left blank that ``problems`` (the
    schema's refusals) name, and which those were."""
    required = set(schema.get("required", ()))
    refused = {str(p.get("path", "")).split(".", 1)[0] for p in problems}
    dropped = sorted(k for k, v in args.items() if k in refused and k not in required and _blank(v))
    return {k: v for k, v in args.items() if k not in dropped}, dropped


RENAMES_KEY = "x-renames"
# What names the existing record an item changes.
_FINDERS = ("uid", "find")
_LOOSE = re.compile(r"[\W_]+")


def _said(value: str, request_text: str) -> bool:
    """``value`` is in the request, word for word (case, quotes and punctuation aside)."""
    words = _LOOSE.sub(" ", value.casefold()).strip()
    return bool(words) and f" {words} " in f" {_LOOSE.sub(' ', request_text.casefold()).strip()} "


# The day a request names, as it names it, with the part of it: the words the executor reads (read_events' ``when``).
_DAYS = (r"today|tomorrow|tonight|oggi|domani|dopodomani|stasera|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
         r"luned[iì]|marted[iì]|mercoled[iì]|gioved[iì]|venerd[iì]|sabato|domenica")
_PARTS = r"morning|afternoon|evening|night|mattina|mattino|pomeriggio|sera|notte"
_DAY_SAID = re.compile(rf"\b(?:(?:next|prossim[oa])\s+)?(?:{_DAYS})(?:\s+(?:{_PARTS}))?\b", re.IGNORECASE)
# The arguments that give a read its days: none of them given, the request's day is the one asked about.
DAY_ARGUMENTS = ("when", "start", "end")


def complete_day(args: Mapping[str, Any], properties: Mapping[str, Any], request_text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``args`` with ``when`` set to the one day the request names, when the call gives none of
    :data:`DAY_ARGUMENTS`; what was added. Two days named ("from Monday to Friday") is a range the
    model must give."""
    out = dict(args)
    if not isinstance(properties.get("when"), Mapping) or any(a in out for a in DAY_ARGUMENTS):
        return out, {}
    said = {m.group(0).casefold(): m.group(0) for m in _DAY_SAID.finditer(request_text)}
    if len(said) != 1:
        return out, {}
    out["when"] = next(iter(said.values()))
    return out, {"when": out["when"]}


def keep_names(args: Mapping[str, Any], schema: Any, request_text: str) -> tuple[dict[str, Any], list[str]]:
    """``args`` without a new name for an existing record that the request does not say (module docstring),
    and the dotted paths of the names left out."""
    root = schema if isinstance(schema, Mapping) else {}
    kept: list[str] = []

    def resolved(node: Any) -> Any:
        for _ in range(16):
            ref = node.get("$ref") if isinstance(node, Mapping) else None
            if not (isinstance(ref, str) and ref.startswith("#/")):
                break
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, Mapping) else None
            node = target
        return node

    def walk(value: Any, node: Any, path: str) -> Any:
        node = resolved(node)
        if not isinstance(node, Mapping):
            return value
        if isinstance(value, list) and isinstance(node.get("items"), Mapping):
            return [walk(v, node["items"], f"{path}.{i}") for i, v in enumerate(value)]
        props = node.get("properties")
        if not isinstance(value, Mapping) or not isinstance(props, Mapping):
            return value
        names_a_record = any(value.get(k) for k in _FINDERS)
        out = {}
        for key, item in value.items():
            sub = resolved(props.get(key))
            at = f"{path}.{key}" if path else key
            if (names_a_record and isinstance(sub, Mapping) and sub.get(RENAMES_KEY) is True and isinstance(item, str)
                    and not _said(item, request_text)):
                kept.append(at)
                continue
            out[key] = walk(item, sub, at)
        return out

    return walk(dict(args), schema, ""), kept
