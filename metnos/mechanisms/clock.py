"""The live clock and id source: the only places the runtime reads them.

Everything that records events takes these as arguments, so that a replay can
hand it the recorded values instead (DESIGN.md, decision 2).
"""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import UUID

from ulid import ULID


def system_clock() -> datetime:
    return datetime.now(timezone.utc)


def new_id() -> UUID:
    """A ULID as a UUID: sortable by creation time, unique without coordination."""
    return ULID().to_uuid()
