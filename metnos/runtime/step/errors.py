"""The one exception shape of the turn library.

Every refusal the turn pieces raise carries a stable machine ``code``, a
human ``message`` and a JSON-safe ``detail`` mapping, so the loop can turn it
into an observation for the LLM or an event without string parsing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class TurnError(Exception):
    """Base class: a structured, JSON-serialisable refusal."""

    def __init__(self, code: str, message: str, detail: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail: dict[str, Any] = dict(detail or {})

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "detail": dict(self.detail)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"
