"""The errors a setting can raise, at the ground floor so that nothing above is imported to raise them.

The mechanisms re-export the ones they own by name (``metnos.mechanisms.llm.errors.LLMConfigError``
is this ``LLMConfigError``), so an ``except`` clause anywhere catches the same class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.errors import MetnosError


class SettingsError(MetnosError):
    """A METNOS_* variable (or a turn setting built by hand) is malformed or out of range.

    Shaped like the turn's structured refusals (a stable ``code``, a ``message``, a ``detail``),
    so a turn can carry it as an observation without parsing the text."""

    def __init__(self, variable: str, value: str, reason: str) -> None:
        message = f"{variable}={value!r} is invalid: {reason}"
        super().__init__(message)
        self.code = "invalid_setting"
        self.message = message
        self.detail: dict[str, Any] = {"variable": variable, "value": value, "reason": reason}
        self.variable = variable
        self.value = value
        self.reason = reason

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "detail": dict(self.detail)}


class ConfigError(MetnosError):
    """config.toml is not valid TOML, or a key in it is unknown or wrong; the message names the key."""


class LLMError(MetnosError):
    """Base of every LLM-layer error (the hierarchy lives in metnos.mechanisms.llm.errors)."""

    kind = "llm_error"

    def __init__(self, message: str) -> None:
        # One line, always: a body excerpt or an OS message may hold newlines.
        super().__init__(" ".join(message.split()))

    @property
    def message(self) -> str:
        return str(self)

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.kind, "message": str(self)}


class LLMConfigError(LLMError):
    """The [llm] configuration (or an override) cannot be used as written."""

    kind = "llm_config"


class NetworkConfigError(MetnosError):
    """``[network]`` in config.toml is not what it must be."""


class TelegramConfigError(MetnosError):
    """``[telegram]`` in config.toml is not what it must be."""


class AutonomyError(MetnosError):
    """An autonomy level that is not one of the three."""


class HttpAddressError(MetnosError):
    """--http or [daemon] http is not a HOST:PORT this machine can listen on."""


class SandboxSettingError(MetnosError):
    """``METNOS_SANDBOX`` holds neither on nor off; the sandbox turns it into SandboxUnavailable."""

    def __init__(self, reason: str, fix: str) -> None:
        # Worded as SandboxUnavailable is, so the line a user reads is the same wherever it is raised.
        super().__init__(f"the sandbox cannot run executors: {reason}; {fix}")
        self.reason = reason
        self.fix = fix


def first_problem(errors: list[Mapping[str, Any]]) -> str:
    """Every problem pydantic found, ``loc: message``, on one line."""
    problems = []
    for err in errors:
        loc = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        problems.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(problems)
