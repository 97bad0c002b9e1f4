"""Tunables of the turn loop, read from an environment mapping.

The pure pieces never look at ``os.environ``: the caller reads the
environment once, here, and passes the resulting :class:`TurnSettings` down.
A value that is present but malformed or out of range is an error (a typo in
``METNOS_JUDGE_THRESHOLD`` must not silently fall back to the default); an
absent or empty variable means the default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from domain.errors import MetnosError
from metnos.runtime.step.errors import TurnError

ENV_POOL_SIZE = "METNOS_ENGINE_POOL_SIZE"
ENV_JUDGE_THRESHOLD = "METNOS_JUDGE_THRESHOLD"
ENV_CAP_STEPS = "METNOS_CAP_STEPS"
ENV_CAP_SAME_EXECUTOR = "METNOS_CAP_SAME_EXECUTOR"
ENV_CAP_SAME_VECTORIAL = "METNOS_CAP_SAME_VECTORIAL"
ENV_SCRATCHPAD_THRESHOLD = "METNOS_SCRATCHPAD_THRESHOLD_BYTES"
ENV_OPENING_READS = "METNOS_OPENING_READS"
ENV_OFFER = "METNOS_ENGINE_OFFER"

# Each setting and the variable that sets it, so a message can name what to change.
ENV_OF_SETTING = {
    "pool_size": ENV_POOL_SIZE, "judge_threshold": ENV_JUDGE_THRESHOLD, "cap_steps": ENV_CAP_STEPS,
    "cap_same_executor": ENV_CAP_SAME_EXECUTOR, "cap_same_vectorial": ENV_CAP_SAME_VECTORIAL,
    "scratchpad_threshold_bytes": ENV_SCRATCHPAD_THRESHOLD, "opening_reads": ENV_OPENING_READS,
    "offer": ENV_OFFER,
}

DEFAULT_POOL_SIZE = 12
# What the model is offered (metnos/runtime/turn/shortlist.py): "catalogue", every
# executor the request may use when they fit in the pool, else the shortlist;
# "shortlist", the pre-filter's ranking completed. Both withhold the side
# effects the request does not ask for. The shortlist stays the default: the
# whole seed catalogue is about 550 tokens of first prompt, up to 654, past the
# 600 of tests/integration/test_first_prompt.py (docs/benchmarks.md).
OFFERS = ("catalogue", "shortlist")
DEFAULT_OFFER = "shortlist"
DEFAULT_JUDGE_THRESHOLD = 0.30
DEFAULT_CAP_STEPS = 30
DEFAULT_CAP_SAME_EXECUTOR = 10
DEFAULT_CAP_SAME_VECTORIAL = 2
DEFAULT_SCRATCHPAD_THRESHOLD = 4096
# Fixed by the spec (first 500 + last 500 characters); not configurable on
# purpose, the LLM prompt describes this shape.
PREVIEW_HEAD_CHARS = 500
PREVIEW_TAIL_CHARS = 500
PHRASE_RECALL_CAP = 3


class SettingsError(TurnError, MetnosError):
    def __init__(self, variable: str, value: str, reason: str) -> None:
        super().__init__(
            "invalid_setting",
            f"{variable}={value!r} is invalid: {reason}",
            {"variable": variable, "value": value, "reason": reason},
        )
        self.variable = variable
        self.value = value
        self.reason = reason


@dataclass(frozen=True, slots=True)
class TurnSettings:
    pool_size: int = DEFAULT_POOL_SIZE
    judge_threshold: float = DEFAULT_JUDGE_THRESHOLD
    cap_steps: int = DEFAULT_CAP_STEPS
    cap_same_executor: int = DEFAULT_CAP_SAME_EXECUTOR
    cap_same_vectorial: int = DEFAULT_CAP_SAME_VECTORIAL
    scratchpad_threshold_bytes: int = DEFAULT_SCRATCHPAD_THRESHOLD
    # Read what the request names before the model is asked (metnos.runtime.turn.sources).
    opening_reads: bool = True
    offer: str = DEFAULT_OFFER

    def __post_init__(self) -> None:
        # Same bounds whether built from env or by hand.
        _check_int("pool_size", self.pool_size, 1, 256)
        _check_float("judge_threshold", self.judge_threshold, 0.0, 1.0)
        _check_int("cap_steps", self.cap_steps, 1, 1000)
        _check_int("cap_same_executor", self.cap_same_executor, 1, 1000)
        _check_int("cap_same_vectorial", self.cap_same_vectorial, 1, 1000)
        # Below ~1 KB a spilled preview (1,000 characters) would be no smaller
        # than the observation it replaces.
        _check_int("scratchpad_threshold_bytes", self.scratchpad_threshold_bytes, 1024, 16 * 1024 * 1024)
        if not isinstance(self.opening_reads, bool):
            raise SettingsError("opening_reads", repr(self.opening_reads), "must be true or false")
        if self.offer not in OFFERS:
            raise SettingsError("offer", repr(self.offer), f"must be one of {', '.join(OFFERS)}")

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _check_int(name: str, value: object, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise SettingsError(name, repr(value), f"must be an integer in [{lo}, {hi}]")


def _check_float(name: str, value: object, lo: float, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SettingsError(name, repr(value), "must be a number")
    if not math.isfinite(value) or not lo <= value <= hi:
        raise SettingsError(name, repr(value), f"must be a number in [{lo}, {hi}]")


def load_turn_settings(env: Mapping[str, str]) -> TurnSettings:
    """Build settings from ``env`` (pass ``os.environ`` or a test dict); the
    variables are read and checked with every other METNOS_* setting."""
    from metnos.settings import load_settings

    return load_settings(env).turn()
