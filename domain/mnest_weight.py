"""The weight of a mnest (seeds/004 ch. 6), as pure arithmetic.

    w(t) = clamp01( w(t - dt) * exp(-lambda * dt) + 0.15 * uses_in_turn )

``dt`` is in days and always comes from event timestamps, so folding the
same events gives the same weights on any day. The Mnest aggregate and the
mnestome fold both call these functions: one formula, two readers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime

REINFORCEMENT = 0.15
DEFAULT_LAMBDA = 0.018  # per day: half-life of about 38 days
MIN_PROTO_WEIGHT = 0.05
DECAY_WEIGHT = 0.20
ARCHIVE_WEIGHT = 0.05
ARCHIVE_IDLE_DAYS = 90
BOOTSTRAP_WEIGHT = 0.30
# Superseded mnests stay visible this long before the ager archives them.
SUPERSEDED_GRACE_DAYS = 30

SECONDS_PER_DAY = 86_400.0


class TimeRunsBackwards(ValueError):
    """A weight was asked for at a moment before the one it was last computed at."""


def clamp01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def days_between(earlier: datetime, later: datetime) -> float:
    delta = (later - earlier).total_seconds() / SECONDS_PER_DAY
    if delta < 0:
        msg = f"{later.isoformat()} is before {earlier.isoformat()}"
        raise TimeRunsBackwards(msg)
    return delta


def decayed(weight: float, dt_days: float, lam: float) -> float:
    """The weight left after ``dt_days`` without use."""
    if dt_days < 0:
        msg = f"negative interval {dt_days} days"
        raise TimeRunsBackwards(msg)
    return clamp01(weight * math.exp(-lam * dt_days))


def reinforced(weight: float, dt_days: float, lam: float, uses: int) -> float:
    """The weight after ``dt_days`` of decay and ``uses`` passings in one turn."""
    if uses < 0:
        msg = f"uses must be >= 0, got {uses}"
        raise ValueError(msg)
    if dt_days < 0:
        msg = f"negative interval {dt_days} days"
        raise TimeRunsBackwards(msg)
    return clamp01(weight * math.exp(-lam * dt_days) + REINFORCEMENT * uses)


def weight_at(weight: float, since: datetime, at: datetime, lam: float) -> float:
    return decayed(weight, days_between(since, at), lam)


def lambda_for(tags: Iterable[str], per_tag: Mapping[str, float] | None = None) -> float:
    """The decay rate of a mnest with these tags.

    When several tags carry their own rate, the slowest wins: the spec asks
    that a mnest is never forgotten quickly, so the most conservative reading
    is the one kept.
    """
    rates = [per_tag[t] for t in tags if per_tag and t in per_tag]
    return min(rates) if rates else DEFAULT_LAMBDA
