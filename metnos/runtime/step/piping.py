"""Data piping between steps: ``from_step: N`` and ``{{stepN.field}}``.

seeds/002 ch. 7, read as follows where the text leaves room:

* Steps are numbered from 1 in the order they ran; a reference may only
  point at an *earlier* step. ``observations`` maps step number to that
  step's full observation (the lead fetches spilled ones back from the
  scratchpad store; this module never sees a preview).
* ``from_step: N`` is replaced by ``entries: <the list step N produced>``.
  The list is the observation's field named by its ``list_field`` key when
  present, else ``entries``, else its only list-valued top-level field; two
  or more candidate lists is an error rather than a guess. ``with_step: M``
  (the second list of ``filter_lists``, seeds/001) is resolved the same way
  into ``with_entries``. An integer written as a digit string is accepted;
  a bool is not. Passing ``entries`` alongside ``from_step`` is refused:
  it is the inline fabrication that ``from_step`` exists to prevent.
* ``{{stepN.path}}`` must be the whole value of an argument (surrounding
  whitespace allowed); the referenced value replaces it with its JSON type
  kept (a number stays a number). ``path`` is dotted, and list indices are
  written ``entries.0.path`` or ``entries[0].path``. Placeholders are found
  at any depth of the arguments (``paths: ["{{step1.path}}"]``); the
  destination is then reported as ``paths.0``. A placeholder embedded in a
  longer string is refused (the spec's "sole value" rule) instead of being
  passed on with literal braces.
* Referencing a step whose observation says ``ok: false`` is refused: its
  fields are an error report, not data.

Every successful substitution is reported as a :class:`Piping`; that list
is what the mnestome learns from, so it names the exact source field and
destination argument.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from metnos.runtime.step.errors import TurnError
from metnos.runtime.step.records import FILE_TEXT, LINE, LINES, RecordsError, file_rows, is_file_list

FROM_STEP = "from_step"
WITH_STEP = "with_step"
# step-reference argument -> the argument it becomes
LIST_REFERENCES: tuple[tuple[str, str], ...] = ((FROM_STEP, "entries"), (WITH_STEP, "with_entries"))

_SOLE_REF = re.compile(r"^\s*\{\{\s*step(\d+)\.([^{}\s]+)\s*\}\}\s*$")
_ANY_REF = re.compile(r"\{\{\s*step\d*[^{}]*\}\}")
# A dotted reference ("{{get_urls.result}}", "{{result.text}}"): as a whole
# value that is not a step's, a model that meant to pipe and named the wrong
# thing; written as is, the placeholder would land in a file.
_DOTTED_REF = re.compile(r"\{\{\s*[A-Za-z_]\w*(?:\.\w+)+\s*\}\}")
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


class PipingError(TurnError):
    """``code`` is one of: bad_step_reference, unknown_step, future_step,
    step_failed, missing_field, no_list, ambiguous_list, not_a_list,
    interpolated_reference, bad_reference, conflicting_args."""


@dataclass(frozen=True, slots=True)
class Piping:
    src_step: int
    src_field: str
    dst_arg: str
    mechanism: str  # "from_step" | "with_step" | "template"
    # The files of the source list were opened into their rows, read as these
    # kinds ("csv", "json+lines"); None: the list passed as it was.
    records: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = {
            "src_step": self.src_step,
            "src_field": self.src_field,
            "dst_arg": self.dst_arg,
            "mechanism": self.mechanism,
        }
        if self.records is not None:
            d["records"] = self.records
        return d


@dataclass(frozen=True, slots=True)
class Resolution:
    args: dict[str, Any]
    pipings: tuple[Piping, ...]

    def to_json(self) -> dict[str, Any]:
        return {"pipings": [p.to_json() for p in self.pipings]}


FIELD = "field"


def _step_number(value: Any, arg: str) -> int:
    if isinstance(value, bool):
        raise PipingError("bad_step_reference", f"{arg} must be a step number, not a boolean",
                          {"arg": arg})
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and value.strip().isdigit():
        n = int(value.strip())
    else:
        raise PipingError("bad_step_reference", f"{arg} must be a step number, got {value!r}",
                          {"arg": arg, "value": repr(value)})
    if n < 1:
        raise PipingError("bad_step_reference", f"{arg} must be 1 or more, got {n}",
                          {"arg": arg, "value": n})
    return n


def _observation(observations: Mapping[int, Any], step: int, current_step: int,
                 ref: str) -> Mapping[str, Any]:
    if step >= current_step:
        raise PipingError("future_step",
                          f"{ref} points at step {step}, but only steps before {current_step} have run",
                          {"step": step, "current_step": current_step})
    if step not in observations:
        raise PipingError("unknown_step", f"{ref}: there is no step {step} in this turn",
                          {"step": step, "known_steps": sorted(observations)})
    obs = observations[step]
    if not isinstance(obs, Mapping):
        raise PipingError("missing_field", f"{ref}: step {step} produced no fields",
                          {"step": step})
    if obs.get("ok") is False:
        raise PipingError("step_failed",
                          f"{ref}: step {step} failed, its output cannot be used as input",
                          {"step": step, "error": str(obs.get("error", ""))[:200]})
    return obs


def list_field_of(observation: Mapping[str, Any], step: int) -> str:
    """The name of the list a step produced (see the module docstring)."""
    declared = observation.get("list_field")
    if isinstance(declared, str) and declared:
        if not isinstance(observation.get(declared), list):
            raise PipingError("not_a_list",
                              f"step {step} declares list_field {declared!r} but has no list there",
                              {"step": step, "field": declared})
        return declared
    if isinstance(observation.get("entries"), list):
        return "entries"
    lists = sorted(k for k, v in observation.items() if isinstance(v, list))
    if len(lists) == 1:
        return lists[0]
    if not lists:
        raise PipingError("no_list", f"step {step} produced no list to pipe",
                          {"step": step, "fields": sorted(map(str, observation))})
    raise PipingError("ambiguous_list",
                      f"step {step} produced several lists ({', '.join(lists)}); "
                      "use {{step%d.<field>}} to pick one" % step,
                      {"step": step, "lists": lists})


def _parse_path(path: str, ref: str) -> list[str | int]:
    parts: list[str | int] = []
    for chunk in path.split("."):
        if chunk == "":
            raise PipingError("bad_reference", f"{ref}: empty segment in field path", {"ref": ref})
        pos = 0
        for m in _SEGMENT.finditer(chunk):
            if m.start() != pos:
                break
            pos = m.end()
            if m.group(2) is not None:
                parts.append(int(m.group(2)))
            elif m.group(1).isdigit():
                parts.append(int(m.group(1)))
            else:
                parts.append(m.group(1))
        if pos != len(chunk):
            raise PipingError("bad_reference", f"{ref}: cannot read field path {path!r}",
                              {"ref": ref})
    return parts


def _lookup(obs: Mapping[str, Any], parts: list[str | int], step: int, ref: str) -> Any:
    value: Any = obs
    walked: list[str] = []
    for part in parts:
        walked.append(str(part))
        if isinstance(part, int) and isinstance(value, list):
            if part >= len(value):
                raise PipingError("missing_field",
                                  f"{ref}: step {step}.{'.'.join(walked[:-1])} has only {len(value)} items",
                                  {"step": step, "field": ".".join(walked)})
            value = value[part]
        elif isinstance(value, Mapping) and str(part) in value:
            value = value[str(part)]
        else:
            available = sorted(map(str, value)) if isinstance(value, Mapping) else []
            raise PipingError("missing_field",
                              f"{ref}: step {step} has no field {'.'.join(walked)}",
                              {"step": step, "field": ".".join(walked), "available": available[:50]})
    return value


def _resolve_value(value: Any, dst: str, observations: Mapping[int, Any], current_step: int,
                   pipings: list[Piping]) -> Any:
    if isinstance(value, str):
        m = _SOLE_REF.match(value)
        if m:
            step = int(m.group(1))
            path = m.group(2)
            ref = "{{step%d.%s}}" % (step, path)
            if step < 1:
                raise PipingError("bad_reference", f"{ref}: steps are numbered from 1", {"ref": ref})
            obs = _observation(observations, step, current_step, ref)
            parts = _parse_path(path, ref)
            resolved = _lookup(obs, parts, step, ref)
            pipings.append(Piping(step, ".".join(map(str, parts)), dst, "template"))
            # A copy, so the executor's input can never alias (and mutate)
            # a recorded observation.
            return copy.deepcopy(resolved)
        if _DOTTED_REF.fullmatch(value.strip()):
            raise PipingError("bad_reference",
                              f"argument {dst}: {value.strip()} names no step; a reference is {{{{stepN.field}}}}, "
                              "N the number of the step that made the value",
                              {"arg": dst, "ref": value.strip()})
        if _ANY_REF.search(value):
            raise PipingError("interpolated_reference",
                              f"argument {dst}: a {{{{stepN.field}}}} reference must be the whole value, "
                              "not part of a longer text",
                              {"arg": dst})
        return value
    if isinstance(value, Mapping):
        return {k: _resolve_value(v, f"{dst}.{k}", observations, current_step, pipings)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_value(v, f"{dst}.{i}", observations, current_step, pipings)
                for i, v in enumerate(value)]
    return value


def resolve_args(args: Mapping[str, Any], observations: Mapping[int, Any], *,
                 current_step: int, rows: bool = False) -> Resolution:
    """Resolve step references in ``args`` proposed for step ``current_step``.

    Returns new arguments (the input is not modified) and the pipings, in
    the order: list references first, then placeholders in argument order.
    Raises :class:`PipingError` on the first reference that cannot be met.
    ``rows``: the destination works on entries, so a list of read files is
    given as the rows inside them (:mod:`metnos.runtime.step.records`).
    """
    if not isinstance(args, Mapping):
        raise PipingError("bad_reference", "arguments must be an object", {})
    if isinstance(current_step, bool) or not isinstance(current_step, int) or current_step < 1:
        raise PipingError("bad_step_reference", "current_step must be a positive integer", {})
    pipings: list[Piping] = []
    out: dict[str, Any] = {}
    injected: dict[str, Any] = {}
    for ref_arg, dst_arg in LIST_REFERENCES:
        if ref_arg not in args:
            continue
        if dst_arg in args:
            raise PipingError("conflicting_args",
                              f"{ref_arg} and {dst_arg} were both given; pass only {ref_arg}",
                              {"arg": dst_arg})
        step = _step_number(args[ref_arg], ref_arg)
        obs = _observation(observations, step, current_step, f"{ref_arg}={step}")
        field = list_field_of(obs, step)
        records = None
        if rows and is_file_list(obs[field]):
            try:
                injected[dst_arg], records = file_rows(obs[field])
            except RecordsError as e:
                raise PipingError(e.code, f"{ref_arg}={step}: {e.message}", e.detail) from None
        else:
            injected[dst_arg] = copy.deepcopy(obs[field])
        pipings.append(Piping(step, field, dst_arg, ref_arg, records))
    reference_args = {ref for ref, _ in LIST_REFERENCES}
    for key, value in args.items():
        if key in reference_args:
            continue
        out[key] = _resolve_value(value, str(key), observations, current_step, pipings)
    out.update(injected)
    if out.get(FIELD) == FILE_TEXT and any(p.records == LINES for p in pipings):
        # The model saw the file's text as `content`; made into lines, that text is each row's `line`.
        out[FIELD] = LINE
    return Resolution(out, tuple(pipings))



def step_refs_in(text: str) -> list[str]:
    """The ``{{stepN...}}`` references in ``text``."""
    return [m.group(0) for m in _ANY_REF.finditer(text)]


def placeholders_in(text: str) -> list[str]:
    """The placeholders left in a final answer: ``{{stepN...}}``, or a dotted
    ``{{name.field}}`` that reads as a reference to something else. The LLM
    must write actual values there (seeds/002 ch. 7.2), so any hit is a defect."""
    return list(dict.fromkeys(m.group(0) for m in (*_ANY_REF.finditer(text), *_DOTTED_REF.finditer(text))))
