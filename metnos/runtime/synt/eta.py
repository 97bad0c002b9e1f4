"""How long a path takes: the proposals' ETA aggregate (seeds/002 ch. 11.2, ``proposals_eta_aggregate``).

A path shape is the executors an answered turn called, in order (a call
repeated back to back counts once). Over the turns answered in the last
``days`` days (7 by default), each shape gets its count and the 50th and
95th percentiles of the turn's duration, nearest rank. The figures are a
DigestWritten event: what a proposal on that path can promise the user as
its wait. Nothing is told; nothing else changes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from metnos.runtime.jobs import CallbackContext, CallbackResult, digest

JOB = "proposals_eta"
WINDOW_DAYS = 7


def path_shape(executors: list[str]) -> str:
    kept = [name for i, name in enumerate(executors) if i == 0 or executors[i - 1] != name]
    return " > ".join(kept)


def percentile(sorted_values: list[int], share: float) -> int:
    """Nearest rank: the smallest value at or above ``share`` of the values."""
    rank = max(1, math.ceil(share * len(sorted_values)))
    return sorted_values[rank - 1]


def _instant(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def aggregate(turns: dict[str, Any], now: datetime, days: int) -> dict[str, dict[str, int]]:
    since = now - timedelta(days=days)
    durations: dict[str, list[int]] = defaultdict(list)
    for turn in turns.values():
        if turn["status"] != "answered" or not turn["executors"] or turn.get("ended") is None:
            continue
        ended = _instant(turn["ended"])
        if not since <= ended <= now:
            continue
        ms = int((ended - _instant(turn["started"])).total_seconds() * 1000)
        durations[path_shape(turn["executors"])].append(ms)
    return {shape: {"turns": len(ms), "p50_ms": percentile(sorted(ms), 0.5), "p95_ms": percentile(sorted(ms), 0.95)}
            for shape, ms in sorted(durations.items())}


def run_proposals_eta(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    days = args.get("days", WINDOW_DAYS)
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        return CallbackResult(ok=False, kind="BadArguments", error={"message": f"days must be a positive integer, got {days!r}"})
    turns = ctx.runtime.turns.catch_up(ctx.runtime.log)["turns"]
    return digest(ctx, JOB, {"days": days, "shapes": aggregate(turns, ctx.now, days)})
