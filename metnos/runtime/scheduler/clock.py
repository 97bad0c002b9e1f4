"""Clocks for the scheduler: the system clock, a hand-moved one, one read from a file.

Every time the scheduler and the runtime use comes from one clock port, so a
test can move time by hand instead of sleeping. ``METNOS_SCHEDULER_CLOCK_FILE``
is for tests only (the daemon-restart test runs ``metnos daemon`` as a real
process): when set, "now" is the ISO timestamp written in that file, read
at every call. Nothing else reads the variable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path

from metnos.mechanisms.clock import system_clock
from domain.due import BadSchedule, parse
from metnos.settings.loader import env_section
from metnos.settings.process import ENV_CLOCK_FILE

CLOCK_FILE_ENV = ENV_CLOCK_FILE


class ManualClock:
    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise BadSchedule("a clock needs an aware datetime")
        self.now = start.astimezone(timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, when: datetime) -> datetime:
        self.now = when.astimezone(timezone.utc)
        return self.now


class FileClock:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self) -> datetime:
        try:
            return parse(self.path.read_text().strip())
        except OSError as e:
            raise BadSchedule(f"{CLOCK_FILE_ENV} names {self.path}, which cannot be read: {e.strerror}") from None


def clock_from_env(env: Mapping[str, str] | None = None) -> Callable[[], datetime]:
    """The clock the settings name (``METNOS_SCHEDULER_CLOCK_FILE``, for tests), else the system's."""
    path = env_section("process", env).scheduler_clock_file
    return FileClock(Path(path)) if path else system_clock
