"""What can go wrong with the log, each said in one line a person can act on."""

from __future__ import annotations

from eventsourcing.persistence import DataError, OperationalError, PersistenceError


class LogUnavailable(OperationalError):
    """The log cannot be opened or written (permissions, full disk)."""


LOG_DAMAGE_ADVICE = ("run `metnos log check` to see which records and turns are damaged, and "
                     "`metnos log salvage NEW_DIR` to write every intact event into a new data folder (the log is only read)")
VIEWS_DAMAGE_ADVICE = "views are derived data: move the views folder aside and run `metnos rebuild`"
# A notification id fits far below this; a key that reads as more is bytes of something else.
_PLAUSIBLE_POSITION = 1 << 48


class CorruptRecord(DataError):
    """A record cannot be read back; names the table, the record's position (or its key, for a
    table not keyed by position) and what to do."""

    def __init__(self, table: str, key: bytes, reason: str) -> None:
        self.table = table
        self.key = key
        self.reason = reason
        super().__init__(f"corrupt or foreign record in table '{table}' {_where(table, key)}: {reason}; {advice_for_table(table)}")


def advice_for_table(table: str) -> str:
    return VIEWS_DAMAGE_ADVICE if table.startswith("view_") else LOG_DAMAGE_ADVICE


def _where(table: str, key: bytes) -> str:
    if table.endswith(".notifications"):
        position = int.from_bytes(key, "big") if len(key) == 8 else _PLAUSIBLE_POSITION
        # Bytes over a page make keys of nonsense: a position is named only when it can be one.
        return f"at position {position} (key {key.hex()})" if 0 < position < _PLAUSIBLE_POSITION else "(its key is unreadable too)"
    return f"at key {key.hex()}"


class LogFromNewerVersion(PersistenceError):
    """The log was written in a format newer than this Metnos understands."""


class BadLogSetting(PersistenceError):
    """An environment variable that configures the log has a bad value."""


class LogDamaged(PersistenceError):
    """A data file is not what its header or the workspace says it should be; it is left untouched."""
