"""Schedules as the CLI, the planner's tools and the daemon see them.

Creating, pausing, resuming, changing, cancelling, listing, showing, the
history of one schedule, and run-now. Every change is an event on the
Schedule aggregate; every read comes from the schedules projection or, for
the history, from the schedule's own events and the invocations they name.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

import jsonschema
from eventsourcing.application import AggregateNotFoundError

from domain.household import HOST
from domain.schedule import ACTIVE, PAUSED, Schedule, ScheduleError, builtin_schedule_id
from domain.invocation import Invocation
from domain.errors import MetnosError
from metnos.runtime.scheduler import approval, callbacks
from metnos.runtime.scheduler.tick import Scheduler
from domain.due import BadSchedule, check_cron, next_slot, parse, stamp, zone
from domain.schedule_words import WordsNotUnderstood, next_times, parse_words
from metnos.runtime.scheduler.words_model import Models, cadence_from_model
from metnos.settings import in_force
from metnos.settings.actors import ActorsConfig

# Slots missed by up to this much are still fired (a daemon restart, a laptop lid).
DEFAULT_GRACE_S = 15 * 60
DEFAULT_MAX_CONSECUTIVE_FAILURES = 3


Confirm = Callable[[dict[str, Any]], tuple[bool, str]]


class SchedulerError(MetnosError):
    """A schedule request that cannot be met: bad fields, unknown id, wrong state."""


class ScheduleService:
    """``actor`` is who asks (seeds/002 ch. 11.2.4): a schedule it creates records it and fires as it,
    within its quota (``policy``: ``[actors]`` of config.toml, the settings in force by default)."""

    def __init__(self, runtime: Any, clock: Any = None, *, actor: str = HOST, policy: ActorsConfig | None = None,
                 models: Models | None = None, confirm: Confirm | None = None, deliver: Any = None) -> None:
        self.runtime = runtime
        # The daemon's outbox for a run-now's message (metnos/runtime/scheduler/tick.py, Deliver); None: send_messages.
        self.deliver = deliver
        # Asks the user to confirm a schedule shown back (its cron and next firings) before it is saved:
        # (yes?, who said it). None: the caller confirmed already (the CLI's prompt, the API's "confirm").
        self.confirm = confirm
        # A tier's model, asked for words the rules and dateparser cannot read (None: nobody is asked).
        self.models = models
        self.clock = clock or runtime.clock
        self.actor = actor
        self._policy = policy

    @property
    def policy(self) -> ActorsConfig:
        if self._policy is None:
            self._policy = in_force().settings.actors
        return self._policy

    # Writing ------------------------------------------------------------------
    def create(
        self, *, target: dict[str, Any], cron: str, args: dict[str, Any] | None = None, timezone: str = "UTC",
        channel: str = "outbox", count: int | None = None, expiry: str | None = None, on_failure: str = "notify",
        max_consecutive_failures: int | None = DEFAULT_MAX_CONSECUTIVE_FAILURES, paused: bool = False,
        grace_s: int = DEFAULT_GRACE_S, label: str = "", owner: str = "user", schedule_id: UUID | None = None,
        approved_by: str | None = None, turn_id: str | None = None, confirmed: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A new schedule. One whose target has side effects needs
        ``approved_by`` (who approved it: a turn's approval, the user at the
        CLI); the approval is recorded with the creation, in one transaction."""
        now = self.clock()
        args = {} if args is None else args
        if owner == "user":
            self.check_quota()
        fields = self._checked(target=target, args=args, cron=cron, timezone=timezone, expiry=expiry, now=now, owner=owner)
        acting = approval.side_effecting(self.runtime.report, target)
        if acting and not approved_by:
            raise SchedulerError(
                f"a schedule that runs {', '.join(sorted(set(acting)))} (side effects) must be approved when it is "
                "created; nothing was scheduled")
        sid = schedule_id or self.runtime.ids()
        try:
            schedule = Schedule.create(
                id=sid, at=now, since=stamp(now), target=target, args=args, cron=fields["cron"], timezone=timezone,
                channel=channel, count=count, expiry=fields["expiry"], on_failure=on_failure,
                max_consecutive_failures=max_consecutive_failures, paused=paused, grace_s=grace_s,
                label=label, owner=owner, actor=self.actor if owner == "user" else HOST,
            )
            if acting:
                self._approve(schedule, acting, approved_by, turn_id, now)
            if confirmed is not None:
                schedule.confirm(by=confirmed["by"], next_fires=confirmed["next_fires"], at=now)
        except ScheduleError as e:
            raise SchedulerError(str(e)) from None
        self.runtime.log.save(schedule)
        self.runtime.schedules.catch_up(self.runtime.log)
        return {"schedule_id": str(sid), "next_fire": self._next_fire(schedule)}

    def check_quota(self) -> None:
        """An actor keeps at most its quota of open (active or paused) schedules."""
        quota, setting_name = self.policy.max_schedules_of(self.actor)
        held = [s for s in self._state()["schedules"].values()
                if s["owner"] == "user" and s.get("actor", HOST) == self.actor and s["status"] in (ACTIVE, PAUSED)]
        if len(held) >= quota:
            raise SchedulerError(
                f"{self.actor} already has {len(held)} open schedules, the most {setting_name} allows ({quota}); "
                f"cancel one (`metnos schedule cancel ID`) or raise {setting_name} in config.toml; nothing was scheduled")

    def read_when(self, when: str, timezone: str = "UTC") -> dict[str, Any]:
        """A cron, or a schedule in words read into one, with its next three
        firings for the user to confirm before anything is created."""
        now = self.clock()
        try:
            zone(timezone)
            read_by = None
            if _is_cron(when):
                cron, count, words = check_cron(when), None, None
            else:
                try:
                    cadence = parse_words(when, timezone=timezone, now=now)
                except WordsNotUnderstood as refused:
                    if self.models is None:
                        raise
                    cadence = cadence_from_model(self.models, when, timezone=timezone, now=now, refused=refused)
                    read_by = "model"
                cron, count, words = cadence.cron, cadence.count, cadence.words
            upcoming = next_times(cron, timezone, now, count=count)
        except BadSchedule as e:
            raise SchedulerError(str(e)) from None
        reading = {"cron": cron, "count": count, "words": words, "timezone": timezone, "next_fires": upcoming}
        # Said only when the model read the words, for the user to check what it made of them.
        return reading if read_by is None else {**reading, "read_by": read_by}

    @staticmethod
    def _approve(schedule: Schedule, acting: list[str], by: str | None, turn_id: str | None, at: datetime) -> None:
        schedule.approve(
            template=approval.template_of(schedule.target, schedule.args), executors=sorted(set(acting)), by=str(by),
            turn_id=turn_id, reason=f"each firing runs {', '.join(sorted(set(acting)))}, which has side effects", at=at,
        )

    def _checked(self, *, target: Any, args: Any, cron: str, timezone: str, expiry: str | None, now: datetime, owner: str) -> dict[str, Any]:
        try:
            cron = check_cron(cron)
            zone(timezone)
            expiry_stamp = None
            if expiry is not None:
                expiry_stamp = stamp(parse(expiry))
                if expiry_stamp <= stamp(now):
                    raise SchedulerError(f"the expiry {expiry} is already past")
        except BadSchedule as e:
            raise SchedulerError(str(e)) from None
        if not isinstance(target, dict):
            raise SchedulerError("target must be an object")
        if not isinstance(args, dict):
            raise SchedulerError("args must be a JSON object")
        kind = target.get("kind")
        if kind == "executor":
            self._check_executor(target.get("name"), args)
        elif kind == "chain":
            steps = target.get("steps") or []
            for number, step in enumerate(steps, start=1):
                if not isinstance(step, dict):
                    raise SchedulerError(f"chain step {number} must be an object {{executor, args}}")
                step_args = {**args, **(step.get("args") or {})} if number == 1 else None
                self._check_executor(step.get("executor"), step_args)
        elif kind == "callback":
            if owner != "builtin":
                raise SchedulerError("callback targets are for builtin maintenance jobs")
            if callbacks.resolve(str(target.get("key"))) is None:
                raise SchedulerError(f"no builtin job {target.get('key')!r}; known: {', '.join(callbacks.keys())}")
        return {"cron": cron, "expiry": expiry_stamp}

    def _check_executor(self, name: Any, args: dict[str, Any] | None) -> None:
        found = self.runtime.report.get(name) if isinstance(name, str) else None
        if found is None:
            known = ", ".join(sorted({e.name for e in self.runtime.report.loaded}))
            raise SchedulerError(f"there is no executor named {name!r} to schedule; executors: {known}")
        if args is not None:
            errors = sorted(jsonschema.Draft7Validator(found.input_schema).iter_errors(args), key=lambda e: list(e.path))
            if errors:
                where = "/".join(str(p) for p in errors[0].path) or "(args)"
                raise SchedulerError(f"the arguments do not fit {name}'s input schema at {where}: {errors[0].message}")

    def _load(self, ref: str) -> Schedule:
        return self.runtime.log.repository.get(UUID(self.find(ref)))

    def _save(self, schedule: Schedule) -> dict[str, Any]:
        self.runtime.log.save(schedule)
        self.runtime.schedules.catch_up(self.runtime.log)
        return self.show(str(schedule.id))

    def _command(self, ref: str, fn: Any) -> dict[str, Any]:
        schedule = self._load(ref)
        try:
            fn(schedule)
        except ScheduleError as e:
            raise SchedulerError(str(e)) from None
        return self._save(schedule)

    def pause(self, ref: str, *, by: str = "user") -> dict[str, Any]:
        return self._command(ref, lambda s: s.pause(by=by, at=self.clock()))

    def resume(self, ref: str, *, by: str = "user") -> dict[str, Any]:
        now = self.clock()
        return self._command(ref, lambda s: s.resume(by=by, since=stamp(now), at=now))

    def toggle(self, ref: str, *, by: str = "user") -> dict[str, Any]:
        state = self.show(ref)
        return self.pause(ref, by=by) if state["status"] == ACTIVE else self.resume(ref, by=by)

    def cancel(self, ref: str, *, by: str = "user", reason: str = "cancelled by the user") -> dict[str, Any]:
        return self._command(ref, lambda s: s.cancel(reason=reason, by=by, at=self.clock()))

    def modify(self, ref: str, changes: dict[str, Any], *, by: str = "user", approved_by: str | None = None,
               when: str | None = None, reading: dict[str, Any] | None = None) -> dict[str, Any]:
        """``when`` is a new cadence in words (or cron), read as at creation; ``reading``: ``when`` as
        read_when read it already (shown to the user and confirmed), kept as it is rather than read again.
        Changing the target or the arguments of a schedule with side effects needs a new
        approval (``approved_by``); without one nothing changes."""
        schedule = self._load(ref)
        acting = approval.side_effecting(self.runtime.report, schedule.target)
        if acting and "args" in changes and changes["args"] != schedule.args and not approved_by:
            raise SchedulerError(f"the arguments of a schedule that runs {', '.join(sorted(set(acting)))} "
                                 "(side effects) change only with a new approval; nothing was changed")
        now = self.clock()
        changes = dict(changes)
        if when is not None:
            if reading is None:
                reading = self.read_when(when, changes.get("timezone", schedule.timezone))
            changes["cron"] = reading["cron"]
            if "count" not in changes and reading["words"] is not None:
                # The words say how often: a one-shot closes after the one firing
                # it names, a cadence runs until cancelled.
                count = None if reading["count"] is None else schedule.fired + reading["count"]
                if count != schedule.count:
                    changes["count"] = count
        if "target" in changes:
            acting_after = approval.side_effecting(self.runtime.report, changes["target"])
            if acting_after and changes["target"] != schedule.target and not approved_by:
                raise SchedulerError(f"a schedule retargeted to {', '.join(sorted(set(acting_after)))} (side effects) "
                                     "changes only with a new approval; nothing was changed")
            acting = acting_after
        if "cron" in changes or "target" in changes or "timezone" in changes or "expiry" in changes or "args" in changes:
            fields = self._checked(
                target=changes.get("target", schedule.target), args=changes.get("args", schedule.args), cron=changes.get("cron", schedule.cron),
                timezone=changes.get("timezone", schedule.timezone), expiry=changes.get("expiry", schedule.expiry),
                now=now, owner=schedule.owner,
            )
            if "cron" in changes:
                changes["cron"] = fields["cron"]
            if "expiry" in changes:
                changes["expiry"] = fields["expiry"]
        def apply(s: Schedule) -> None:
            s.modify(changes=changes, by=by, since=stamp(now), at=now)
            if acting and ("args" in changes or "target" in changes):
                self._approve(s, acting, approved_by, None, now)

        return self._command(ref, apply)

    def run_now(self, ref: str) -> dict[str, Any]:
        schedule = self._load(ref)
        refused = approval.refusal(self.runtime.report, schedule.approval, schedule.target, schedule.args)
        if refused is not None:
            raise SchedulerError(f"run-now refused: {refused}")
        record = Scheduler(self.runtime, self.clock, deliver=self.deliver).run_now(self.find(ref))
        self.runtime.schedules.catch_up(self.runtime.log)
        return record

    def install_builtin_jobs(self) -> list[str]:
        """Create the builtin maintenance schedules that are missing; returns the keys created."""
        created = []
        for job in callbacks.BUILTIN_JOBS:
            sid = builtin_schedule_id(job.key)
            try:
                self.runtime.log.repository.get(sid)
                continue
            except AggregateNotFoundError:
                pass
            self.create(
                target={"kind": "callback", "key": job.key}, args=dict(job.args), cron=job.cron, channel=job.channel,
                on_failure="notify", max_consecutive_failures=None, grace_s=job.grace_s, label=job.label,
                owner="builtin", schedule_id=sid,
            )
            created.append(job.key)
        return created

    # Reading ------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return self.runtime.schedules.catch_up(self.runtime.log)

    def find(self, ref: str) -> str:
        schedules = self._state()["schedules"]
        ref = (ref or "").strip().lower()
        if ref in schedules:
            return ref
        matches = [sid for sid in schedules if sid.startswith(ref)] if len(ref) >= 4 else []
        if not matches:
            raise SchedulerError(f"no schedule {ref!r}; see `metnos schedule list`")
        if len(matches) > 1:
            raise SchedulerError(f"{ref!r} matches {len(matches)} schedules; give more of the id")
        return matches[0]

    def list(self, *, status: str | None = None, owner: str | None = None) -> list[dict[str, Any]]:
        return self.rows(self._state(), status=status, owner=owner)

    @staticmethod
    def rows(state: dict[str, Any], *, status: str | None = None, owner: str | None = None) -> list[dict[str, Any]]:
        """The schedules of a schedules-projection state, oldest first (the daemon reads them while a turn writes)."""
        rows = sorted(state["schedules"].values(), key=lambda s: (s["created"], s["id"]))
        return [_public(s) for s in rows if (status is None or s["status"] == status) and (owner is None or s["owner"] == owner)]

    def show(self, ref: str) -> dict[str, Any]:
        return _public(self._state()["schedules"][self.find(ref)])

    def history(self, ref: str) -> dict[str, Any]:
        sid = self.find(ref)
        rows = []
        for event in self.runtime.log.events.get(UUID(sid)):
            fields = {k: v for k, v in vars(event).items() if k not in ("originator_id", "originator_version", "timestamp", "originator_topic")}
            row = {"position": event.originator_version, "type": type(event).__name__, "at": stamp(event.timestamp), **fields}
            if isinstance(event, Schedule.FiringFinished):
                row["invocations"] = [self._invocation(i) for i in event.invocation_ids]
                if event.notice and event.notice.get("invocation_id"):
                    row["notice"] = {**event.notice, "invocation": self._invocation(event.notice["invocation_id"])}
            rows.append(row)
        return {"schedule_id": sid, "events": rows}

    def _invocation(self, invocation_id: str) -> dict[str, Any]:
        events = list(self.runtime.log.events.get(UUID(invocation_id)))
        if not events:
            return {"id": invocation_id, "missing": True}
        first = events[0]
        out = {"id": invocation_id, "executor": first.executor, "version": first.version, "caller": first.caller, "args": first.args}
        # How it ended: its completion or refusal, not the files' before- and after-images around them.
        ended = [e for e in events[1:] if isinstance(e, (Invocation.InvocationCompleted, Invocation.InvocationRefused))]
        if ended:
            out.update(ok=getattr(ended[-1], "ok", False), kind=ended[-1].kind, duration_ms=getattr(ended[-1], "duration_ms", 0))
        return out

    def _next_fire(self, schedule: Schedule) -> str | None:
        if schedule.status != ACTIVE:
            return None
        slot = next_slot(schedule.cron, schedule.timezone, schedule.cursor)
        if schedule.expiry is not None and slot >= schedule.expiry:
            return None
        return slot


def _is_cron(text: Any) -> bool:
    try:
        check_cron(text)
    except BadSchedule:
        return False
    return True


def _public(s: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in s.items() if k not in ("wake", "position")}


__all__ = ["ACTIVE", "PAUSED", "ScheduleService", "SchedulerError"]
