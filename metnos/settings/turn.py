"""``[turn]``: the turn loop's tunables (seeds/002 ch. 8-10), each also a ``METNOS_*`` variable.

The pure pieces never look at ``os.environ``: the loader reads the environment
once and the loop receives a :class:`TurnSettings`. A value that is present but
malformed or out of range is an error (a typo in ``METNOS_JUDGE_THRESHOLD`` must
not silently fall back to the default); an absent or empty variable means the
default. The bounds hold however the settings are built, by the loader or by hand.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from pydantic import ConfigDict, field_validator
from pydantic.dataclasses import dataclass

from metnos.settings.declare import setting
from metnos.settings.errors import SettingsError

__all__ = ["DEFAULT_CAP_SAME_EXECUTOR", "DEFAULT_CAP_SAME_VECTORIAL", "DEFAULT_CAP_STEPS", "DEFAULT_JUDGE_THRESHOLD",
           "DEFAULT_OFFER", "DEFAULT_POOL_SIZE", "DEFAULT_SCRATCHPAD_THRESHOLD", "ENV_OF_SETTING", "OFFERS",
           "PHRASE_RECALL_CAP", "PREVIEW_HEAD_CHARS", "PREVIEW_TAIL_CHARS", "SettingsError", "TurnSettings"]

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
# What the model is offered (metnos/runtime/turn/shortlist.py). "learned", the default: of the
# executors a classifier learned from written requests (metnos/runtime/step/learned_offer.py),
# those it names, most likely first, beside what the request's words name and the ranking's picks
# of executors it never learned (an MCP server's tools, a synt); on eight sets of requests written
# by people who never saw the rules it offers 99.13% of the executors they need, the rules
# alone 70.7% (docs/benchmarks.md). "shortlist", the pre-filter's ranking completed; "gated",
# the shortlist with the classifier's reading of "does this change anything" alone; "shaped",
# the shortlist with filter_entries and compute_entries beside any executor that reads entries;
# "catalogue", every executor the request may use when they fit in the pool, else the shortlist.
# All withhold the side effects the request does not ask for.
OFFERS = ("catalogue", "gated", "learned", "shaped", "shortlist")
DEFAULT_OFFER = "learned"
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

_NUMBERS = ("pool_size", "judge_threshold", "cap_steps", "cap_same_executor", "cap_same_vectorial", "scratchpad_threshold_bytes")


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class TurnSettings:
    pool_size: int = setting(DEFAULT_POOL_SIZE, "How many executors the pre-filter may offer the model (1-256).",
                             env=ENV_POOL_SIZE)
    judge_threshold: float = setting(DEFAULT_JUDGE_THRESHOLD, "The rule judge's score under which a step is refused (0.0-1.0).",
                                     env=ENV_JUDGE_THRESHOLD, allow_inf_nan=False)
    cap_steps: int = setting(DEFAULT_CAP_STEPS, "The most steps a turn may take (1-1000).", env=ENV_CAP_STEPS)
    cap_same_executor: int = setting(DEFAULT_CAP_SAME_EXECUTOR, "The most calls of one executor in a turn (1-1000).",
                                     env=ENV_CAP_SAME_EXECUTOR)
    cap_same_vectorial: int = setting(DEFAULT_CAP_SAME_VECTORIAL,
                                      "The most identical calls of one vectorial executor in a turn (1-1000).",
                                      env=ENV_CAP_SAME_VECTORIAL)
    scratchpad_threshold_bytes: int = setting(
        DEFAULT_SCRATCHPAD_THRESHOLD,
        "An observation larger than this many bytes is spilled to the scratchpad, the model seeing a preview (1024-16777216).",
        env=ENV_SCRATCHPAD_THRESHOLD)
    # Read what the request names before the model is asked (metnos.runtime.turn.sources).
    opening_reads: bool = setting(True, "Read the files and pages a request names before the model is asked.",
                                  env=ENV_OPENING_READS)
    offer: str = setting(DEFAULT_OFFER, "What the model is offered: `learned` (the executors a classifier learned from "
                         "written requests names, most likely first, what the request names, and the ranking's picks of "
                         "executors it never learned), `shortlist` (the pre-filter's ranking), `gated` (the shortlist, "
                         "without side effects for a request that classifier reads as changing nothing), `shaped` (the "
                         "shortlist, filter_entries and compute_entries beside an executor that reads entries) or "
                         "`catalogue` (every executor the request may use, when they fit in the pool).", env=ENV_OFFER)

    @field_validator(*_NUMBERS, "opening_reads", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: Any) -> Any:
        # pydantic would read True as 1: a number given as true/false is a mistake, not a 1.
        if info.field_name in _NUMBERS and isinstance(value, bool):
            raise SettingsError(info.field_name, repr(value), "must be a number")
        return value

    def __post_init__(self) -> None:
        # Same bounds whether built by the loader or by hand.
        _check_int("pool_size", self.pool_size, 1, 256)
        _check_float("judge_threshold", self.judge_threshold, 0.0, 1.0)
        _check_int("cap_steps", self.cap_steps, 1, 1000)
        _check_int("cap_same_executor", self.cap_same_executor, 1, 1000)
        _check_int("cap_same_vectorial", self.cap_same_vectorial, 1, 1000)
        # Below ~1 KB a spilled preview (1,000 characters) would be no smaller
        # than the observation it replaces.
        _check_int("scratchpad_threshold_bytes", self.scratchpad_threshold_bytes, 1024, 16 * 1024 * 1024)
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
