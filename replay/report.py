"""A replay's divergence in words, for the CLI and the dashboard alike."""

from __future__ import annotations

from typing import Any

import orjson


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
