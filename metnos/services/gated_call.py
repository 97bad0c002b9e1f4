"""One executor call asked for by a channel (an MCP client): checked here, then run as a turn of its own.

A tool call from outside passes the checks a turn's step passes, in the
same order (metnos/runtime/turn/loop.py, "A step" in docs/architecture.md), with the
very functions the loop uses: the argument schema (``validate_args``), the
sandbox policy (``policy_checker``), the vaglio with its guard policy
(``vaglio``, ``guard_policy``) and, where the vaglio asks, the user; then the
Invoker, which checks the signature again and runs the executor in the
sandbox. Only the planner is missing: the client chose the call.

The autonomy level is config.toml's ``[runtime] autonomy``, read at each
list and call as a turn reads it: at ``read_only`` a tool with side effects
is not listed and a call to one is refused (``AutonomyReadOnly``) before any
other check; ``full`` asks what ``supervised`` asks (metnos/mechanisms/sandbox/autonomy.py).

The check and the run are two calls because the approval sits between them
and is asked in the channel's own way (an MCP elicitation, awaited on an
event loop). A call that passes runs as a turn (:meth:`GatedCaller.run_turn`,
metnos/runtime/turn/direct.py): listed, replayable and undoable like any
other; :meth:`GatedCaller.run` runs it outside a turn (a bench, a test).
Every outcome is recorded: a call refused before the spawn is an
``Invocation`` with ``InvocationRefused`` (kind ``UnknownExecutor``,
``Quarantined``, ``AutonomyReadOnly``, ``SchemaViolation``, ``PolicyViolation``,
``VaglioDenied`` or ``NotApproved``), a call that ran is
the Invoker's ``InvocationRequested``/``InvocationCompleted``; all carry the
channel's ``caller``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.invocation import Invocation
from domain.canonical import canonical_hash
from metnos.mechanisms.failures import InvocationError
from metnos.mechanisms.invocation.service import READ_ONLY_REFUSED
from metnos.runtime.booted import Runtime
from metnos.mechanisms.sandbox import autonomy
from metnos.runtime.step.catalogue import TurnExecutor, inline_refs
from metnos.runtime.turn.direct import call_text
from metnos.runtime.turn.quarantined import quarantined_by_name, refusal_message, show_command
from metnos.runtime.turn.session import guard_policy, policy_checker, turn_catalogue
from metnos.settings.loader import for_workspace, load
from metnos.runtime.step.vaglio import ASK, DENY, Verdict, vaglio
from metnos.runtime.step.validation import validate_args

UNKNOWN = "UnknownExecutor"
QUARANTINED = "Quarantined"
SCHEMA = "SchemaViolation"
POLICY = "PolicyViolation"
VAGLIO_DENIED = "VaglioDenied"
NOT_APPROVED = "NotApproved"


@dataclass(frozen=True)
class Tool:
    """An active executor as a channel offers it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    side_effects: bool
    idempotent: bool
    destructive: bool


@dataclass
class Checked:
    """A call that passed the checks before the vaglio's question, or the refusal."""

    name: str
    args: dict[str, Any]
    caller: dict[str, Any]
    refusal: dict[str, Any] | None = None
    verdict: Verdict | None = None
    level: str = autonomy.DEFAULT

    @property
    def needs_approval(self) -> bool:
        return self.refusal is None and self.verdict is not None and self.verdict.decision == ASK


@dataclass
class CallResult:
    ok: bool
    kind: str
    observation: dict[str, Any]
    invocation_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def tool_of(te: TurnExecutor) -> Tool:
    m = te.loaded.manifest
    schema = inline_refs(dict(te.loaded.input_schema), te.loaded.input_schema)
    schema.setdefault("type", "object")
    return Tool(name=te.name, description=m.description.get("en") or m.executor.summary, input_schema=schema,
                side_effects=te.entry.side_effects, idempotent=te.entry.idempotent,
                destructive=te.entry.side_effects and m.may_destroy)


class GatedCaller:
    """Calls executors for one channel on a host's runtime, one writer at a time.

    ``host`` lends the runtime through ``writing()`` (the daemon's host, or
    :class:`~metnos.services.host.RuntimeHost`).
    """

    def __init__(self, host: Any, *, caller: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
        self.host = host
        self.caller = dict(caller)
        self._given_env = env
        self.env = dict(os.environ if env is None else env)
        self.settings = for_workspace(host.runtime.workspace, env).turn
        runtime = host.runtime
        self.policy = guard_policy(runtime, self.env)
        self._checkers: dict[str, Any] = {}

    def _level(self, rt: Runtime) -> str:
        # Read at each list and call (docs/channels.md), through the one loader.
        return load(self._given_env, config_file=rt.workspace.config_file).settings.runtime.autonomy

    def _check_policy(self, rt: Runtime, level: str) -> Any:
        if level not in self._checkers:
            self._checkers[level] = policy_checker(rt, self.env, level)
        return self._checkers[level]

    def tools(self) -> list[Tool]:
        with self.host.writing() as rt:
            level = self._level(rt)
            catalogue = turn_catalogue(rt)
            return [tool_of(te) for te in catalogue.executors.values() if autonomy.offers(level, side_effects=te.entry.side_effects)]

    def check(self, name: str, args: dict[str, Any], *, caller: Mapping[str, Any] | None = None) -> Checked:
        """Schema, policy and vaglio; a refusal is recorded here. ``caller`` adds to the channel's."""
        with self.host.writing() as rt:
            checked = self._check(rt, name, args, {**self.caller, **(caller or {})})
            if checked.refusal is not None:
                self._record_refusal(rt, checked)
            return checked

    def _check(self, rt: Runtime, name: str, args: dict[str, Any], caller: dict[str, Any]) -> Checked:
        level = self._level(rt)
        catalogue = turn_catalogue(rt)
        te = catalogue.get(name)
        if te is None:
            held = quarantined_by_name(catalogue, name)
            if held is not None:
                # Not "no such executor": the client is told which, why, and how to see it.
                shown = held.to_json()
                return Checked(name, args, caller, refusal={"kind": QUARANTINED, "error": {"message": refusal_message(shown), **shown, "show": show_command(name)},
                                                    "hint": f"`{show_command(name)}` shows why; the user decides whether to rehabilitate it"})
            return Checked(name, args, caller, refusal={"kind": UNKNOWN, "error": {"message": f"there is no active executor named {name!r}"}})
        if not autonomy.offers(level, side_effects=te.entry.side_effects):
            # First, as a turn refuses it: a read-only level is the reason, not the grants it narrows.
            said = autonomy.refusal(level, name)
            return Checked(name, args, caller, level=level, refusal={"kind": READ_ONLY_REFUSED, "error": {"message": said["error"]}, "hint": said["hint"]})
        problems = validate_args(te.loaded.input_schema, args)
        if problems:
            return Checked(name, args, caller, refusal={"kind": SCHEMA, "error": {"message": f"the arguments do not fit {name}'s schema", "errors": problems}})
        try:
            self._check_policy(rt, level)(te.loaded, args)
        except InvocationError as e:
            return Checked(name, args, caller, refusal={"kind": POLICY, "error": e.details(),
                                                "hint": f"{name} may only touch what its manifest declares"})
        # The client named the tool: that is the request the judge reads.
        verdict = vaglio(name, args, intent_text=f"call {name}", policy=self.policy, threshold=self.settings.judge_threshold,
                         side_effects=te.entry.side_effects, idempotent=te.entry.idempotent, autonomy=level)
        if verdict.decision == DENY:
            return Checked(name, args, caller, verdict=verdict, level=level,
                           refusal={"kind": VAGLIO_DENIED, "error": {"message": verdict.reason, "verdict": verdict.to_json()}})
        return Checked(name, args, caller, verdict=verdict, level=level)

    def decline(self, checked: Checked, by: str) -> CallResult:
        """The user said no (or could not be asked): recorded, nothing runs."""
        checked.refusal = {"kind": NOT_APPROVED, "error": {"message": f"{checked.name} needs approval and it was not given ({by})",
                                                           "by": by, "verdict": checked.verdict.to_json() if checked.verdict else None}}
        with self.host.writing() as rt:
            self._record_refusal(rt, checked)
        return self.refused(checked)

    def refused(self, checked: Checked) -> CallResult:
        assert checked.refusal is not None
        refusal = checked.refusal
        observation = {"ok": False, "error_class": refusal["kind"], "error": refusal["error"]}
        if "hint" in refusal:
            observation["hint"] = refusal["hint"]
        return CallResult(False, refusal["kind"], observation, refusal.get("invocation_id", ""))

    def run(self, checked: Checked, *, approved_by: str | None = None) -> CallResult:
        """The checked call, through the Invoker (signature, sandbox, schemas), recorded."""
        if checked.refusal is not None:
            return self.refused(checked)
        caller = approved_caller(checked, approved_by)
        with self.host.writing() as rt:
            call = rt.call(checked.name, checked.args, caller=caller, autonomy=checked.level)
        observation = call.observation()
        ok = call.ok and observation.get("ok") is not False
        kind = "ok" if ok else (call.refusal.kind if call.refusal else (call.outcome.kind if call.outcome and call.outcome.kind else "Failed"))
        return CallResult(ok, kind, observation, str(call.invocation.id) if call.invocation else "")

    def has_inbox(self) -> bool:
        """Whether the host keeps the one inbox (the daemon's): a question a client cannot show can wait there."""
        return getattr(self.host, "approvals", None) is not None

    def ask_inbox(self, checked: Checked) -> tuple[bool, str]:
        """The approval asked in the host's one inbox (docs/daemon.md, "One inbox"), where the dashboard, Telegram's
        /inbox, the API and ``metnos inbox`` show it, for a client that cannot show it itself; the first answer
        counts, nothing within the inbox's time is a no. (approved?, who answered)"""
        reason = checked.verdict.reason if checked.verdict else "it needs your approval"
        return self.host.approvals.ask("mcp", 1, checked.name, checked.args, reason, request=call_text(checked.name, checked.args))

    def run_turn(self, checked: Checked, *, approved_by: str | None = None) -> CallResult:
        """The checked call as a turn of its own (docs/channels.md, "MCP calls are turns"): listed in
        ``metnos turns list``, replayable, undoable with ``metnos undo``. The approval the channel obtained
        (``approved_by``) answers the turn's question; without one, a question is a no."""
        if checked.refusal is not None:
            return self.refused(checked)
        caller = approved_caller(checked, approved_by)
        seen: dict[str, Any] = {}

        def approve(step: int, executor: str, args: dict[str, Any], reason: str) -> tuple[bool, str]:
            return (True, approved_by) if approved_by else (False, "mcp:not-asked")

        def observe(event: Any) -> None:
            kind = type(event).__name__
            if kind == "StepInvoked" and getattr(event, "invocation_id", None):
                seen["invocation_id"] = event.invocation_id
            elif kind == "ObservationRecorded":
                seen["observation"] = event.observation

        actor = f"mcp:{caller.get('client', 'unknown')}"
        outcome = self.host.call(checked.name, checked.args, approver=approve, channel="mcp", actor=actor,
                                 observer=observe, caller=caller)
        observation = seen.get("observation")
        if not isinstance(observation, dict):
            message = outcome.message or f"{checked.name} did not run"
            observation = {"ok": False, "error_class": outcome.status, "error": {"message": message}}
        ok = outcome.status == "answered" and observation.get("ok") is not False
        kind = "ok" if ok else str(observation.get("error_class") or (outcome.failure or {}).get("kind") or outcome.status)
        return CallResult(ok, kind, observation, str(seen.get("invocation_id") or ""), extra={"turn_id": outcome.turn_id})

    def _record_refusal(self, rt: Runtime, checked: Checked) -> None:
        assert checked.refusal is not None
        catalogue = turn_catalogue(rt)
        te = catalogue.get(checked.name)
        loaded = te.loaded if te is not None else None
        held = quarantined_by_name(catalogue, checked.name) if loaded is None else None
        version = loaded.version if loaded else (held.entry.version if held else "")
        origin = loaded.origin if loaded else (held.origin if held else "")
        at = rt.clock()
        invocation_id = rt.ids()
        invocation = Invocation.request(
            id=invocation_id, at=at, executor=checked.name, version=version,
            origin=origin, digest=loaded.digest if loaded else "", args=checked.args,
            args_hash=canonical_hash(checked.args), caller=checked.caller, turn_id=None, trace_id=str(invocation_id),
            autonomy=checked.level,
        )
        invocation.refuse(kind=checked.refusal["kind"], error=checked.refusal["error"], at=at)
        rt.log.save(invocation)
        rt.refresh()
        checked.refusal["invocation_id"] = str(invocation_id)


def approved_caller(checked: Checked, approved_by: str | None) -> dict[str, Any]:
    """The caller a checked call runs as, with who approved it; a call that needs approval and has none is refused."""
    if checked.needs_approval and approved_by is None:
        msg = f"{checked.name} needs approval before it runs"
        raise ValueError(msg)
    return {**checked.caller, **({"approved_by": approved_by} if approved_by else {})}
