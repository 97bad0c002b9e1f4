"""Small helpers both wire formats share."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def derived_call_id(raw: dict[str, Any], index: int) -> str:
    """An id for a call the server gave none for (or that came as text).

    It is a function of the recorded reply, so parsing the same reply again on
    replay gives the same id.
    """
    digest = hashlib.sha256(json.dumps(raw, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return f"call_{digest[:16]}_{index}"


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
