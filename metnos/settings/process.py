"""Switches of one process, from the environment only: debugging, the sandbox switch, birth reuse, a test clock."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from metnos.settings.declare import setting
from metnos.settings.sandbox import VARIABLE as SANDBOX_VARIABLE
from metnos.settings.sandbox import parse_sandbox

ENV_DEBUG = "METNOS_DEBUG"
ENV_BIRTH_REUSE = "METNOS_BIRTH_REUSE"
ENV_CLOCK_FILE = "METNOS_SCHEDULER_CLOCK_FILE"


class ProcessConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    debug: bool = setting(False, "On an unexpected error, show its traceback.", env=ENV_DEBUG, toml=False,
                          flag="--debug", dest="debug")
    sandbox: str | None = setting(None, "`off` runs executors without the sandbox, at your own risk (also 0, no, false); "
                                        "unset or `on` requires it. Checked by the sandbox, where it is used.",
                                  env=SANDBOX_VARIABLE, toml=False)
    birth_reuse: bool = setting(True, "Reuse an executor's earlier birth when nothing it ran through has changed.",
                                env=ENV_BIRTH_REUSE, toml=False)
    scheduler_clock_file: str | None = setting(None, "A file holding the time the scheduler reads instead of the clock "
                                                     "(for tests).", env=ENV_CLOCK_FILE, toml=False)

    @property
    def sandbox_off(self) -> bool:
        """True for an explicit off; SandboxSettingError for a value that is neither on nor off."""
        return parse_sandbox(self.sandbox)
