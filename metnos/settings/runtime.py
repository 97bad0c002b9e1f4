"""``[runtime]`` of config.toml: the planner's mode, the autonomy level, the
hybrid escalation rules and the LLM judge (seeds/002 ch. 3, 4, 9.2).

    [runtime]
    mode = "local"            # local | online | hybrid
    online_tier = "wise"      # the tier that plans in online mode
    proposer_tier = "wise"    # the tier the step-by-step proposer starts on
    escalate_tiers = true     # after a failed step, the proposer moves to the next distinct tier up
    escalate_to_frontier = false   # ... and may reach the frontier tier

    autonomy = "supervised"   # read_only | supervised | full
    intent = "rules"          # rules | model: the intent extractor (middle tier) names the executors a request needs
    fillers = true            # an online plan may leave ${FILLER: ...} for the fast tier to write once its steps ran
    summarise_spills = false  # the scratchpad summariser (fast tier) writes a gist of each spilled observation

    [runtime.prompts]         # added to a role's system prompt
    proposer = "Answer in Italian."

    [runtime.hybrid]          # when a hybrid turn leaves the local loop for one online plan
    online_tier = "frontier"  # the tier that plans online (frontier, or wise for a bigger local model)
    critical = ["send_messages", "network"]   # executors or capabilities that escalate at once
    on_local_failure = true   # the local loop failed a step, or its answer was unusable
    on_cap = true             # the local loop hit a cap
    marker = "!online"        # a request that starts with it asks for online

    [runtime.judge]           # the LLM judge of the vaglio, beside the rule judge
    enabled = false
    tier = "middle"
    threshold = 0.5           # a score under it refuses the step
    capabilities = []         # judge only executors holding one of these (fs:write, network, ...); empty: every side effect

``ask --mode`` and ``ask --autonomy`` override the first two for one turn, and
``ask --set KEY=VALUE`` any key (``intent=model``, ``judge.enabled=true``,
``fillers=false``), its VALUE read as in config.toml.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from metnos.mechanisms.sandbox import autonomy

MODES = ("local", "online", "hybrid")


class HybridConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    online_tier: Literal["fast", "middle", "wise", "frontier"] = "frontier"
    critical: tuple[str, ...] = ()
    on_local_failure: bool = True
    on_cap: bool = True
    marker: str = Field(default="!online", min_length=1, max_length=40)


class JudgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    tier: Literal["fast", "middle", "wise", "frontier"] = "middle"
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    capabilities: tuple[str, ...] = ()


class RuntimeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["local", "online", "hybrid"] = "local"
    # The tier that plans in online mode (a hybrid escalation uses [runtime.hybrid] online_tier).
    online_tier: Literal["fast", "middle", "wise", "frontier"] = "wise"
    # The tier the local proposer starts on, and whether a failed step moves it up to the next distinct tier.
    proposer_tier: Literal["fast", "middle", "wise", "frontier"] = "wise"
    escalate_tiers: bool = True
    escalate_to_frontier: bool = False
    # The distinct tiers, lowest first (filled by the session from [llm.tiers.*]; recorded so replay climbs alike).
    tier_ladder: tuple[str, ...] = ()
    # Text added to a role's system prompt.
    prompts: dict[Literal["proposer", "online", "judge", "intent", "filler", "summariser"], str] = Field(default_factory=dict)
    autonomy: str = autonomy.DEFAULT
    # The roles beside the proposer (seeds/002 ch. 4), on the tiers ROLE_TIERS gives them.
    intent: Literal["rules", "model"] = "rules"
    fillers: bool = True
    summarise_spills: bool = False
    hybrid: HybridConfig = HybridConfig()
    judge: JudgeConfig = JudgeConfig()

    @field_validator("autonomy", mode="before")
    @classmethod
    def _level(cls, v: Any) -> str:
        try:
            return autonomy.parse_level(v, source="autonomy")
        except autonomy.AutonomyError:
            raise ValueError(f"{v!r} is not an autonomy level (read_only, supervised or full)") from None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def system_prompt(self, role: str, base: str) -> str:
        """The role's built-in prompt, and the user's words for that role after it."""
        added = self.prompts.get(role, "").strip()  # type: ignore[call-overload]
        return f"{base.rstrip()}\n{added}\n" if added else base

    def tier_above(self, tier: str) -> str | None:
        """Where a failing proposer moves: the next distinct tier of the ladder, if escalation is on."""
        if not self.escalate_tiers or tier not in self.tier_ladder:
            return None
        at = self.tier_ladder.index(tier)
        return self.tier_ladder[at + 1] if at + 1 < len(self.tier_ladder) else None


# What a [runtime] recorded before a role existed ran without: replay reads it so.
RECORDED_BEFORE_ROLES: dict[str, Any] = {"fillers": False}


def recorded_runtime(runtime: dict[str, Any] | None) -> RuntimeConfig:
    """The [runtime] a turn recorded, as it ran."""
    return RuntimeConfig.model_validate({**RECORDED_BEFORE_ROLES, **(runtime or {})})


def load_runtime_config(config_file: Path | None, overrides: Sequence[str] = ()) -> RuntimeConfig:
    """The ``[runtime]`` section (defaults when absent), with ``overrides``
    (``KEY=VALUE``, a dotted KEY for a sub-table) over it; an unknown key or a
    bad value is a ConfigError naming it."""
    from metnos.settings.config_file import ConfigError, read_config, validate_section

    data = read_config(config_file)
    section = copy.deepcopy(data.get("runtime", {}))
    for item in overrides if isinstance(section, dict) else ():
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--set {item!r}: write it KEY=VALUE, e.g. intent=model")
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()  # a bare word is a string, as a user would mean it
        *tables, last = key.strip().split(".")
        at = section
        for table in tables:
            at = at.setdefault(table, {})
            if not isinstance(at, dict):
                raise ConfigError(f"--set {item!r}: {table} is not a table")
        at[last] = value
    where = f"{config_file or 'config.toml'}" + (f" with --set {', '.join(overrides)}" if overrides else "")
    return validate_section(RuntimeConfig, "runtime", section, where)
