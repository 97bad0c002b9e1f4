"""Schedules: add, list, show, pause, resume, cancel, history, run now (seeds/002 ch. 11.2).

The scheduler's own service (metnos/runtime/scheduler/service.py) records
every change in the log; here it is reached on a runtime booted on the
scheduler's clock (a command), or on the daemon's runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from domain.household import HOST
from metnos.runtime.booted import Runtime
from metnos.runtime.scheduler.service import (
    DEFAULT_GRACE_S,
    SchedulerError,
    ScheduleService,
)
from metnos.services import wiring

__all__ = ["ACTIONS", "DEFAULT_GRACE_S", "SchedulerError", "act", "add", "add_on", "command", "listed", "modify", "read_on", "read_when", "rows"]

# What a schedule's id can be told to do, from the CLI and the daemon's API.
ACTIONS = ("show", "pause", "resume", "cancel", "history", "run-now")
COMMANDS = ("pause", "resume", "cancel", "run-now")


def add(**schedule: Any) -> dict[str, Any]:
    """A new schedule (ScheduleService.create's fields); its id and next firing."""
    with wiring.boot_scheduled() as rt:
        return ScheduleService(rt).create(**schedule)


def read_when(when: str, timezone: str = "UTC") -> dict[str, Any]:
    """A cadence in words or cron, read: {cron, count, words, timezone, next_fires}; nothing is created.
    Words the rules and dateparser cannot read are asked of the model (started only then)."""
    with wiring.boot_scheduled() as rt, _models(rt) as models:
        return ScheduleService(rt, models=models).read_when(when, timezone)


@contextmanager
def _models(rt: Runtime) -> Iterator[Callable[[str], Any]]:
    """A tier's model for one command, its router made on first use and closed at the end."""
    router: Any = None

    def for_tier(tier: str) -> Any:
        nonlocal router
        if router is None:
            router = wiring.llm_router(rt.workspace)
        return router.for_tier(tier)

    try:
        yield for_tier
    finally:
        if router is not None:
            router.close()


def modify(ref: str, changes: dict[str, Any], *, approved_by: str | None = None, when: str | None = None,
           reading: dict[str, Any] | None = None) -> dict[str, Any]:
    """Change a schedule's cadence (``when``: words or cron), target, arguments or options, as an event.
    Words are read as add reads them (the model only for what the rules and dateparser cannot);
    ``reading``: ``when`` as read_when already read it (shown to the user), kept rather than read again."""
    with wiring.boot_scheduled() as rt, _models(rt) as models:
        return ScheduleService(rt, models=models).modify(ref, changes, approved_by=approved_by, when=when, reading=reading)


def listed(status: str | None = None) -> list[dict[str, Any]]:
    with wiring.boot_scheduled() as rt:
        return ScheduleService(rt).list(status=status)


def act(action: str, ref: str) -> dict[str, Any]:
    """One of ACTIONS on the schedule ``ref`` (its id or a unique prefix)."""
    with wiring.boot_scheduled() as rt:
        return _act(ScheduleService(rt), action, ref)


def _act(service: ScheduleService, action: str, ref: str) -> dict[str, Any]:
    if action == "history":
        return service.history(ref)
    if action == "run-now":
        return service.run_now(ref)
    return getattr(service, action)(ref)


def command(runtime: Runtime, action: str, ref: str, *, deliver: Callable[[str, str, str], Any] | None = None) -> dict[str, Any]:
    """One of COMMANDS on a held runtime (the daemon's); ``deliver``: its outbox, for a run-now's message."""
    if action not in COMMANDS:
        raise SchedulerError(f"unknown schedule command {action!r}; one of {', '.join(COMMANDS)}")
    return _act(ScheduleService(runtime, deliver=deliver), action, ref)


def read_on(runtime: Runtime, when: str, timezone: str = "UTC", *, models: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """A cadence in words or cron read on a held runtime (the daemon's): nothing is created. ``models``
    (the host's tiers) reads the words the rules and dateparser cannot."""
    return ScheduleService(runtime, models=models).read_when(when, timezone)


def add_on(runtime: Runtime, *, when: str, target: dict[str, Any], timezone: str = "UTC", count: int | None = None,
           actor: str = HOST, models: Callable[[str], Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A new schedule on a held runtime from a cadence in words or cron, already confirmed by the
    user (``actor``, who it is then the schedule of): its id, next firing, the cron read and the next firings."""
    reading = read_on(runtime, when, timezone, models=models)
    made = ScheduleService(runtime, actor=actor).create(target=target, cron=reading["cron"], timezone=timezone,
                                                        count=reading["count"] if count is None else count, **fields)
    return {**made, "cron": reading["cron"], "words": reading["words"], "next_fires": reading["next_fires"]}


def rows(runtime: Runtime) -> list[dict[str, Any]]:
    """Every schedule as the read model has it (the daemon's list)."""
    return ScheduleService.rows(runtime.schedules.state())


def install_builtin_jobs(runtime: Runtime) -> list[str]:
    return ScheduleService(runtime).install_builtin_jobs()
