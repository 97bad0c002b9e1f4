"""``[daemon]``: the long-running process (docs/daemon.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from metnos.settings.declare import setting
from metnos.settings.errors import HttpAddressError
from metnos.settings.http_address import DEFAULT_HTTP, parse_address


# A request is words and a few ids: 1 MiB is ample, and a 60 MB body stays out of the log.
DEFAULT_MAX_REQUEST_BYTES = 1 << 20


class DaemonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    http: str = setting(DEFAULT_HTTP, "Where the daemon serves its HTTP API and the dashboard, HOST:PORT.",
                        flag="--http", dest="http")
    approval_timeout_s: float = setting(300.0, "How long an approval asked over HTTP waits before it is a no, and a turn's "
                                        "question before the turn ends needs_input (seconds).",
                                        gt=0, le=86400, allow_inf_nan=False)

    max_request_bytes: int = setting(DEFAULT_MAX_REQUEST_BYTES, "The most bytes a request's body may hold, on the API, the "
                                     "dashboard and MCP at /mcp; a larger one is refused with 413 (1024-1073741824).",
                                     ge=1024, le=1 << 30)

    delivery_attempts: int = setting(10, "How many times the outbox tries to send a message before it gives up and the message "
                                     "waits in the inbox, undelivered, to be retried or dismissed (1-1000).", ge=1, le=1000)
    delivery_first_delay_s: float = setting(2.0, "How long the outbox waits after a failed send before the next try; doubled "
                                            "after each failure up to delivery_max_delay_s (seconds).",
                                            gt=0, le=86400, allow_inf_nan=False)
    delivery_max_delay_s: float = setting(300.0, "The longest wait between two tries of a send (seconds, at least "
                                          "delivery_first_delay_s).", gt=0, le=86400, allow_inf_nan=False)

    @field_validator("delivery_max_delay_s")
    @classmethod
    def _ceiling(cls, v: float, info: Any) -> float:
        first = info.data.get("delivery_first_delay_s")
        if first is not None and v < first:
            raise ValueError(f"must be at least delivery_first_delay_s ({first}), not {v}")
        return v

    @field_validator("http")
    @classmethod
    def _address(cls, v: str) -> str:
        try:
            parse_address(v)
        except HttpAddressError as e:
            raise ValueError(str(e)) from None
        return v
