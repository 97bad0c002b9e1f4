"""What can go wrong with the log, each said in one line a person can act on."""

from __future__ import annotations

from eventsourcing.persistence import DataError, OperationalError, PersistenceError


class LogUnavailable(OperationalError):
    """The log cannot be opened or written (permissions, full disk)."""


class CorruptRecord(DataError):
    """A record in the log cannot be read back; names the table and the key."""

    def __init__(self, table: str, key: bytes, reason: str) -> None:
        self.table = table
        self.key = key
        self.reason = reason
        super().__init__(f"corrupt or foreign record in table '{table}' at key {key.hex()}: {reason}")


class LogFromNewerVersion(PersistenceError):
    """The log was written in a format newer than this Metnos understands."""


class BadLogSetting(PersistenceError):
    """An environment variable that configures the log has a bad value."""


class LogDamaged(PersistenceError):
    """A data file is not what its header or the workspace says it should be; it is left untouched."""
