"""Replay a recorded turn through the runtime's own loop and check it took the same path.

The loop runs again with ports fed from the log (replay/ports.py) against the
current catalogue and settings; the events it would emit are compared with
the recorded ones, position by position, on type and on a canonical hash of
their decisions (context fields and measurements aside, see domain/turn.py).
The first difference is reported with the turn, the position, the expected
and the found event, and what changed around them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.utils import get_topic

import metnos
from domain.base import event_state
from domain.turn import LATE_FIELDS, OPEN, STOPPED_EARLY, Turn, decision_fields, status_of
from metnos.mechanisms.blobs import BlobStore
from domain.canonical import canonical_hash
from domain.errors import MetnosError
from metnos.runtime.booted import Runtime
from metnos.runtime.turn.loop import TurnLoop, TurnRequest
from metnos.mechanisms.sandbox import autonomy
from metnos.runtime.step.policies import guard_policy, policy_checker
from metnos.runtime.turn.session import turn_catalogue
from metnos.settings.loader import for_workspace
from metnos.settings.turn import ENV_OF_SETTING
from replay.causes import LOG_DAMAGE, edited_reply_in_agreement, explain
from replay.ports import RecordedPorts, ReplayExhausted, output_resolver
import blake3
from metnos.mechanisms.executors.signing import SIGNED_FILES

class UnknownTurn(MetnosError):
    """No turn with that id in the log."""


def event_name(event: Any) -> str:
    return type(event).__name__


def fingerprint(event: Any) -> str:
    return canonical_hash(decision_fields(event_name(event), event_state(event)))


def same_decision(recorded: Any, produced: Any) -> bool:
    """The same event type and decision; a field the recorded event predates (LATE_FIELDS) is not compared."""
    name = event_name(recorded)
    if name != event_name(produced):
        return False
    if fingerprint(recorded) == fingerprint(produced):
        return True
    was = event_state(recorded)
    unrecorded = {f for f in LATE_FIELDS.get(name, ()) if was.get(f) is None}
    if not unrecorded:
        return False
    now = {k: v for k, v in event_state(produced).items() if k not in unrecorded}
    return canonical_hash(decision_fields(name, {k: v for k, v in was.items() if k not in unrecorded})) == canonical_hash(decision_fields(name, now))


@dataclass
class Divergence:
    turn_id: str
    position: int
    step: int | None
    expected: dict[str, Any] | None
    found: dict[str, Any] | None
    changed: dict[str, Any]
    note: str = ""
    # Why, in the user's terms (replay/causes.py): each a kind, a message, maybe a diff.
    causes: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id, "position": self.position, "step": self.step,
            "expected": self.expected, "found": self.found, "changed": self.changed, "note": self.note,
            "causes": self.causes,
        }


@dataclass
class ReplayResult:
    turn_id: str
    events: int
    divergence: Divergence | None = None
    drift: list[dict[str, Any]] = field(default_factory=list)
    # How the turn stopped before its end, if it did ("interrupted at step 2",
    # "abandoned", "still open"): replayed up to where it stopped.
    stopped: str = ""

    @property
    def same_path(self) -> bool:
        return self.divergence is None

    def to_json(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id, "same_path": self.same_path, "events": self.events,
            "divergence": self.divergence.to_json() if self.divergence else None, "drift": self.drift,
            "stopped": self.stopped,
        }


class CollectingSink:
    """Takes the events the replayed loop emits; writes nothing anywhere.

    Events are collected as they are recorded (the loop's observer), so a
    replay cut short inside a step still shows that step's events.
    """

    def __init__(self) -> None:
        self.events: list[Any] = []

    def observe(self, event: Any) -> None:
        self.events.append(event)

    def commit(self, aggregates: list[Any]) -> None:
        for aggregate in aggregates:
            aggregate.collect_events()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class Replayer:
    def __init__(
        self,
        runtime: Runtime,
        *,
        env: Mapping[str, str] | None = None,
        ask_llm: Callable[..., Any] | None = None,
        re_execute: Callable[[str, dict[str, Any]], dict[str, Any] | None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.catalogue = turn_catalogue(runtime)
        # The settings of the runtime's workspace, as the command loaded them (or as ``env`` gives them).
        self.settings = for_workspace(runtime.workspace, env).turn
        self.env = dict(os.environ if env is None else env)
        self.policy = guard_policy(runtime, self.env)
        self.check_policy = policy_checker(runtime, self.env)
        self.resolve_output = output_resolver(BlobStore(runtime.workspace.blobs_dir))
        self.ask_llm = ask_llm
        self.re_execute = re_execute

    def turn_ids(self) -> Iterator[str]:
        topic = get_topic(Turn.TurnStarted)
        for _, event in self.runtime.log.domain_events(topics=(topic,)):
            yield str(event.originator_id)

    def recorded(self, turn_id: str) -> list[Any]:
        try:
            ident = UUID(turn_id)
        except ValueError:
            raise UnknownTurn(f"{turn_id!r} is not a turn id (see `metnos turns list`)") from None
        events = [e for e in self.runtime.log.events.get(ident) if not isinstance(e, Turn.TurnUndone)]
        if not events or not isinstance(events[0], Turn.TurnStarted):
            raise UnknownTurn(f"there is no turn {turn_id} in the log (see `metnos turns list`)")
        return events

    def replay(self, turn_id: str) -> ReplayResult:
        recorded = self.recorded(turn_id)
        stopped = _stopped_early(recorded)
        if recorded and isinstance(recorded[-1], STOPPED_EARLY):
            # The close was decided outside the loop (a signal, another
            # process): the loop cannot emit it again, only what led to it.
            recorded = recorded[:-1]
        invocations = {
            e.invocation_id: list(self.runtime.log.events.get(UUID(e.invocation_id)))
            for e in recorded if isinstance(e, Turn.StepInvoked) and e.invocation_id
        }

        def current(name: str) -> tuple[str, str] | None:
            te = self.catalogue.get(name)
            return (te.loaded.version, te.loaded.digest) if te else None

        ports = RecordedPorts(recorded, invocations, resolve_output=self.resolve_output, current_executor=current)
        drift: list[dict[str, Any]] = []
        if self.ask_llm is not None:
            ports.ask_llm = self.ask_llm  # type: ignore[method-assign]
        if self.re_execute is not None:
            ports.call_executor = self._re_executing(ports, drift)  # type: ignore[method-assign]
        sink = CollectingSink()
        start = recorded[0]
        # The policy check sees the profile the turn's autonomy level derived.
        check_policy = self.check_policy if start.autonomy == autonomy.DEFAULT else policy_checker(self.runtime, self.env, start.autonomy)
        loop = TurnLoop(
            ports=ports, catalogue=self.catalogue, settings=self.settings, policy=self.policy, sink=sink,
            runtime_version=metnos.__version__, check_policy=check_policy, observer=sink.observe,
        )
        note = ""
        try:
            loop.run(TurnRequest(text=start.text, actor=start.actor, channel=start.channel, mode=start.mode, autonomy=start.autonomy,
                                 principal=start.principal, approvals=tuple(start.approvals or ()), conversation=start.conversation,
                                 runtime=start.runtime, home=start.home if start.home is not None else "", language=start.language))
        except ReplayExhausted as e:
            note = str(e)
        divergence = compare(turn_id, recorded, sink.events, note=note, up_to_recorded=bool(stopped))
        if divergence is None:
            divergence = _edited_in_agreement(turn_id, recorded)
        else:
            divergence.changed.update(self._context_changes(recorded, sink.events))
            divergence.causes = explain(recorded, sink.events, divergence.position, divergence.changed, ENV_OF_SETTING)
            if any(c["kind"] in LOG_DAMAGE for c in divergence.causes):
                # The replay ran out of recorded replies, or met them out of turn, because the log was changed:
                # the causes say so, and a note about the replay's asking would only mislead.
                divergence.note = ""
        return ReplayResult(turn_id, len(recorded), divergence, drift, stopped)

    def _re_executing(self, ports: RecordedPorts, drift: list[dict[str, Any]]) -> Callable[..., Any]:
        replay_call = ports.call_executor

        def call(name: str, args: dict[str, Any], **kw: Any) -> Any:
            result = replay_call(name, args, **kw)
            fresh = self.re_execute(name, args)  # type: ignore[misc]
            if fresh is None:
                return result
            varies = self._output_varies(name)
            # An executor that reads the clock or the web declares it: its
            # values differ by nature, and only a changed shape is drift.
            measure = shape if varies else (lambda o: o)
            if canonical_hash(measure(fresh)) != canonical_hash(measure(result.observation)):
                drift.append({
                    "step": kw.get("step"), "executor": name, "recorded": result.observation, "now": fresh,
                    "compared": f"shape (its output varies with the {varies})" if varies else "value",
                })
            return result

        return call

    def _files_on_disk(self, name: str, version: str) -> dict[str, str]:
        """The signed files of a version that no longer loads (quarantined, most often because they changed)."""


        held = self.runtime.report.get(name, version) or next(
            (q for q in self.runtime.report.quarantined if q.name == name and q.version == version), None)
        if held is None:
            return {}
        found = {}
        for f in SIGNED_FILES:
            try:
                found[f] = "blake3:" + blake3.blake3((Path(held.dir) / f).read_bytes()).hexdigest()
            except OSError:
                found[f] = "missing"
        return found

    def _output_varies(self, name: str) -> str | None:
        entry = self.catalogue.get(name)
        return entry.loaded.manifest.contract.output_varies if entry is not None else None

    def _context_changes(self, recorded: list[Any], produced: list[Any]) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        start = recorded[0]
        if start.runtime_version != metnos.__version__:
            changes["runtime_version"] = {"recorded": start.runtime_version, "now": metnos.__version__}
        now_settings = self.settings.to_json()
        settings = {k: {"recorded": v, "now": now_settings.get(k)} for k, v in start.settings.items() if now_settings.get(k) != v}
        if settings:
            changes["settings"] = settings
        rec_cat = next((e for e in recorded if isinstance(e, Turn.CatalogueResolved)), None)
        if rec_cat is not None:
            before = {e["name"]: (e["version"], e["digest"]) for e in rec_cat.entries}
            after = {e["name"]: (e["version"], e["digest"]) for e in self.catalogue.entries}
            files_then = {e["name"]: e.get("files") or {} for e in rec_cat.entries}
            files_now = {e["name"]: e.get("files") or {} for e in self.catalogue.entries}
            files_now.update({name: self._files_on_disk(name, before[name][0]) for name in before if name not in after})
            executors = {
                name: {
                    "recorded": list(before[name]) if name in before else None, "now": list(after[name]) if name in after else None,
                    "files": _changed_files(files_then.get(name, {}), files_now.get(name, {})),
                }
                for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)
            }
            if executors:
                changes["executors"] = executors
        return changes


def _changed_files(then: dict[str, str], now: dict[str, str]) -> list[dict[str, Any]]:
    """Which signed files of an executor differ (none known when the turn predates file digests)."""
    if not then or not now:
        return []
    return [{"file": f, "recorded": then.get(f), "now": now.get(f)} for f in sorted(set(then) | set(now)) if then.get(f) != now.get(f)]


def shape(value: Any) -> Any:
    """Keys and types, not values: what stays the same when a clock or a web page moves on."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        kinds = {canonical_hash(shape(v)): shape(v) for v in value}
        return ["list", *(kinds[k] for k in sorted(kinds))]
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _describe(event: Any) -> dict[str, Any]:
    return {"type": event_name(event), "state": decision_fields(event_name(event), event_state(event)), "hash": fingerprint(event)}


def _stopped_early(recorded: list[Any]) -> str:
    """How the turn stopped before its end, or "" when it ended as a turn ends."""
    last = recorded[-1]
    if isinstance(last, Turn.TurnInterrupted):
        return f"interrupted by {last.signal} at step {last.step}"
    if isinstance(last, Turn.TurnAbandoned):
        return f"abandoned at step {last.step}"
    return "still open" if status_of(recorded) == OPEN else ""


def _edited_in_agreement(turn_id: str, recorded: list[Any]) -> Divergence | None:
    """The same path, but over a reply edited in the log with the events after it: a divergence from
    what the model sent, at that reply."""
    found = edited_reply_in_agreement(recorded)
    if found is None:
        return None
    i, cause = found
    reply = recorded[i]
    sent = {"type": event_name(reply), "state": {"round": reply.round, "reply": "as the model sent it: see the diff below"}}
    return Divergence(turn_id, i + 1, None, _describe(reply), sent, {}, causes=[cause])


def compare(turn_id: str, recorded: list[Any], produced: list[Any], *, note: str = "", up_to_recorded: bool = False) -> Divergence | None:
    """The first position where the events differ. ``up_to_recorded``: the
    recorded turn stopped early, and what the replay does after its last event
    was never decided live, so it is not compared."""
    length = len(recorded) if up_to_recorded else max(len(recorded), len(produced))
    for i in range(length):
        r = recorded[i] if i < len(recorded) else None
        p = produced[i] if i < len(produced) else None
        if r is not None and p is not None and same_decision(r, p):
            continue
        step = getattr(r, "step", None) if r is not None else getattr(p, "step", None)
        expected = _describe(r) if r is not None else None
        found = _describe(p) if p is not None else None
        changed: dict[str, Any] = {}
        if expected and found and expected["type"] == found["type"]:
            keys = sorted(set(expected["state"]) | set(found["state"]))
            changed["fields"] = {
                k: {"recorded": expected["state"].get(k), "now": found["state"].get(k)}
                for k in keys if expected["state"].get(k) != found["state"].get(k)
            }
        return Divergence(turn_id, i + 1, step, expected, found, changed, note)
    return None
