"""``[model]``: the embedded model's shared warm server (metnos.mechanisms.llm.shared_server)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from metnos.settings.declare import setting

DEFAULT_IDLE_S = 600.0
ENV_IDLE = "METNOS_MODEL_IDLE_S"


class ModelServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    idle_s: float = setting(DEFAULT_IDLE_S, "Seconds the embedded model's warm server outlives its last use "
                                            "(0: each command starts and stops its own; at most 604800).",
                            env=ENV_IDLE, ge=0, le=7 * 24 * 3600, allow_inf_nan=False)
