"""A replay's divergence in words, for the CLI and the dashboard alike."""

from __future__ import annotations

import difflib
from typing import Any

import orjson

# A drift shown as JSON is cut to this many lines of difference: enough to see what changed.
_DRIFT_LINES = 40


def format_divergence(result: Any) -> str:
    d = result.divergence
    lines = [f"turn {result.turn_id} diverged at position {d.position}" + (f" (step {d.step})" if d.step else "")]
    exp = d.expected
    found = d.found
    lines.append(f"  expected: {exp['type'] if exp else '(nothing)'}  {orjson.dumps(exp['state'], default=str).decode()[:300] if exp else ''}")
    lines.append(f"  found:    {found['type'] if found else '(nothing)'}  {orjson.dumps(found['state'], default=str).decode()[:300] if found else ''}")
    for key, change in d.changed.items():
        if key == "fields":
            for field, values in change.items():
                lines.append(f"  changed field {field}: {orjson.dumps(values['recorded'], default=str).decode()[:120]} -> {orjson.dumps(values['now'], default=str).decode()[:120]}")
    if d.note:
        lines.append(f"  note: {d.note}")
    for cause in d.causes:
        lines.append(f"  why: {cause['message']}")
        lines.extend(f"    {line}" for line in cause.get("diff", "").splitlines())
    return "\n".join(lines)


def format_drift(turn_id: str, drift: dict[str, Any]) -> str:
    """An executor run again that observes something else: which file changed, and how; for an
    observation that holds no files, how the observation itself changed."""
    lines = [f"turn {turn_id} step {drift['step']}: {drift['executor']} now observes something else than recorded "
             f"(compared by {drift['compared']})"]
    files = changed_files(drift["recorded"], drift["now"])
    for path, was, now in files:
        what = "is gone" if now is None else "is new" if was is None else "changed since the turn"
        lines.append(f"  file {path} {what}:")
        lines.extend(f"    {line}" for line in difflib.unified_diff(
            (was or "").splitlines(), (now or "").splitlines(), "recorded", "now", lineterm=""))
    if not files:
        shown = list(difflib.unified_diff(_lines(drift["recorded"]), _lines(drift["now"]), "recorded", "now", lineterm=""))
        lines.extend(f"    {line}" for line in shown[:_DRIFT_LINES])
        if len(shown) > _DRIFT_LINES:
            lines.append(f"    ... {len(shown) - _DRIFT_LINES} more lines (`--json` has both observations whole)")
    return "\n".join(lines)


def changed_files(recorded: Any, now: Any) -> list[tuple[str, str | None, str | None]]:
    """(path, content then, content now) of each file an observation's entries hold that differs; entries
    are paired in order (the same request reads the same files in the same order, though a home moved
    since the turn gives them other paths)."""
    was, is_ = _file_entries(recorded), _file_entries(now)
    changed = []
    for i in range(max(len(was), len(is_))):
        then = was[i] if i < len(was) else None
        current = is_[i] if i < len(is_) else None
        if then is not None and current is not None and then[1] == current[1]:
            continue
        if then is not None and current is not None and then[0] != current[0]:
            path = f"{current[0]} (then {then[0]})"
        else:
            path = (current or then)[0]  # type: ignore[index]
        changed.append((path, then[1] if then else None, current[1] if current else None))
    return changed


def _file_entries(observation: Any) -> list[tuple[str, str]]:
    entries = observation.get("entries") if isinstance(observation, dict) else None
    return [(e["path"], e["content"]) for e in entries or () if isinstance(e, dict) and isinstance(e.get("path"), str)
            and isinstance(e.get("content"), str)]


def _lines(value: Any) -> list[str]:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS, default=str).decode().splitlines()
