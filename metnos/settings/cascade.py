"""The cascade's thresholds (docs/cascade.md): environment variables only, no config.toml keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from metnos.settings.declare import setting

ENV_COSINE = "METNOS_CASCADE_COSINE"
ENV_MIN_SUCCESSES = "METNOS_CASCADE_MIN_SUCCESSES"
DEFAULT_COSINE = 0.8
DEFAULT_MIN_SUCCESSES = 2


class CascadeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cosine: float = setting(DEFAULT_COSINE, "The least similarity (0-1] of a request to a learnt one for its plan to be offered.",
                            env=ENV_COSINE, toml=False, gt=0, le=1, allow_inf_nan=False)
    min_successes: int = setting(DEFAULT_MIN_SUCCESSES, "How many successful turns a template needs before it is used.",
                                 env=ENV_MIN_SUCCESSES, toml=False, ge=1)
