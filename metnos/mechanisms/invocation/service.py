"""An invocation as the runtime makes it: checks, sandbox, and its events.

The low-level ``invoke`` runs one executor under its fence and reports an
outcome; this service adds what the log must know: which exact executor
(digest) was asked for what (arguments and their hash), by whom, and what came
back. The signature is checked again at every call (seeds/000 ch. 3): an
executor tampered with after boot is quarantined on the spot and never run.
The events are left pending on the returned aggregate so the caller can commit
them with the rest of its step, in one transaction.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from nacl.signing import VerifyKey

from domain.invocation import Invocation
from metnos.mechanisms.blobs import BlobStore
from domain.canonical import canonical_hash, canonical_json
from domain.errors import MetnosError
from domain.remote import RemoteRefused
from metnos.mechanisms.executors.context import build_ctx
from metnos.mechanisms.executors.loader import LoadedExecutor, LoadReport, Quarantined
from metnos.mechanisms.executors.signing import verify_executor
from metnos.mechanisms.executors.mcp_pin import MCP_ORIGIN, MCP_PIN_CHECK, MCP_SCHEMA_CHECK, SCHEMA_CHANGED_CLASSES, SERVER_FILE, pin_problem
from metnos.mechanisms.invocation.capture import FileCapture
from metnos.mechanisms.failures import FailureKind, SandboxUnavailable
from metnos.mechanisms.invocation.outcome import InvocationOutcome, failure_observation
from metnos.mechanisms.invocation.runner import UNAVAILABLE, invoke
from metnos.mechanisms.sandbox import autonomy as autonomy_levels
from metnos.mechanisms.sandbox.bwrap import require_sandbox
from metnos.mechanisms.sandbox.policy import writes_narrowed_to_arguments
from metnos.settings.workspace import Workspace
import orjson

# Observations above this size go to the blob store; the event keeps the digest.
INLINE_OUTPUT_LIMIT = 64 * 1024

# Outcomes decided before any spawn are refusals, not completions.
_BEFORE_SPAWN = (FailureKind.POLICY_VIOLATION.value, FailureKind.SANDBOX_UNAVAILABLE.value)

UNKNOWN = "UnknownExecutor"
QUARANTINED = "Quarantined"
# An executor whose manifest names a device (docs/remote.md): refused before the device ran it
# (offline, revoked, certificate, drift), or failed once it may have run (a timeout, the device's own error).
REMOTE_REFUSED = "RemoteRefused"
REMOTE_FAILED = "RemoteFailed"
_REMOTE_MAY_HAVE_RUN = ("timeout", "device-error")
CREDENTIAL_MISSING = "CredentialMissing"
READ_ONLY_REFUSED = "AutonomyReadOnly"

# Runs an executor on the device its manifest names: (executor, arguments, trace_id=, idempotency_id=) -> the device's
# answer ({"ok", "kind", "output", "error", "sandbox", "layers", "before", "after", ...}); raises RemoteRefused.
RemoteRunner = Callable[..., dict[str, Any]]


@dataclass
class Refusal:
    """The executor could not even be asked: nothing may run, unknown, or quarantined."""

    kind: str
    message: str
    quarantine: Quarantined | None = None
    # Structured detail beyond the message (SandboxUnavailable: reason, fix).
    details: dict[str, Any] | None = None

    def to_record(self) -> dict[str, Any]:
        return {"ok": False, "kind": self.kind, "error": self.details or {"message": self.message}}


@dataclass
class Call:
    invocation: Invocation | None
    outcome: InvocationOutcome | None
    refusal: Refusal | None = None
    executor: LoadedExecutor | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # A check that failed at call time: the version to quarantine (a refusal's, or one found after the run).
    quarantined: Quarantined | None = None

    def __post_init__(self) -> None:
        if self.quarantined is None and self.refusal is not None:
            self.quarantined = self.refusal.quarantine

    @property
    def ok(self) -> bool:
        return self.outcome is not None and self.outcome.ok

    def observation(self) -> dict[str, Any]:
        """What the planner sees of the call."""
        if self.refusal is not None:
            return {"ok": False, "error": {"kind": self.refusal.kind, **(self.refusal.details or {"message": self.refusal.message})}}
        assert self.outcome is not None
        if self.outcome.ok and self.outcome.output is not None:
            return self.outcome.output
        return failure_observation(self.outcome.kind, self.outcome.error, self.outcome.stderr_tail)


def _mcp_tool_changed(target: LoadedExecutor, outcome: InvocationOutcome) -> Quarantined | None:
    if target.origin != MCP_ORIGIN or not outcome.ok or not isinstance(outcome.output, dict):
        return None
    error = outcome.output.get("error") or {}
    if error.get("class") not in SCHEMA_CHANGED_CLASSES:
        return None
    return Quarantined(target.origin, target.name, target.version, target.dir, SERVER_FILE, MCP_SCHEMA_CHECK,
                       str(error.get("message") or error["class"]))


class Invoker:
    def __init__(
        self,
        *,
        workspace: Workspace,
        report: LoadReport,
        verify_key: VerifyKey,
        clock: Callable[[], datetime],
        new_id: Callable[[], UUID],
        is_blocked: Callable[[LoadedExecutor], str | None] = lambda _: None,
        config: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        credentials: Callable[[LoadedExecutor], dict[str, str]] | None = None,
        seed_secrets: Callable[[LoadedExecutor], dict[str, str]] | None = None,
    ) -> None:
        """``credentials`` gives an imported executor the secrets its manifest
        names (metnos.runtime.skills.vault), for that call's environment alone;
        ``seed_secrets`` does the same for the seeds that hold accounts (mail, calendars,
        address books), whose secrets the runtime keeps in that vault too."""
        self.workspace = workspace
        self.credentials = credentials
        self.seed_secrets = seed_secrets
        self.report = report
        self.verify_key = verify_key
        self.clock = clock
        self.new_id = new_id
        self.is_blocked = is_blocked
        self.config = config
        self.env = env
        self.blobs = BlobStore(workspace.blobs_dir)
        self.capture = FileCapture(workspace=workspace, blobs=self.blobs, env=env)
        # Set where the runtime is wired (metnos/services/wiring.py): how a device's executor is called.
        self.remote: RemoteRunner | None = None

    def resolve(self, name: str, version: str | None = None) -> LoadedExecutor | Refusal:
        found = self.report.get(name, version)
        if found is not None:
            blocked = self.is_blocked(found)
            if blocked:
                return Refusal(QUARANTINED, f"{name} {found.version} is quarantined: {blocked}")
            return found
        for q in self.report.quarantined:
            if q.name == name and (version is None or q.version == version):
                return Refusal(QUARANTINED, f"{name} {q.version} is quarantined: {q.reason}", q)
        return Refusal(UNKNOWN, f"there is no executor named {name!r}" + (f" at version {version}" if version else ""))

    def call(
        self,
        name: str,
        args: dict[str, Any],
        *,
        caller: dict[str, Any],
        turn_id: str | None = None,
        trace_id: str | None = None,
        version: str | None = None,
        autonomy: str = autonomy_levels.DEFAULT,
    ) -> Call:
        """``autonomy`` derives the profile the call runs under (read_only binds
        every grant read-only) and, under read_only, refuses an executor that
        declares side effects before anything is spawned."""
        try:
            sandbox = require_sandbox(self.env)
        except SandboxUnavailable as e:
            refusal = Refusal(e.kind.value, str(e), details=e.details())
            refused = self._refused(name, version or "", "", "", args, caller, turn_id, trace_id, refusal, UNAVAILABLE, autonomy)
            return Call(invocation=refused, outcome=None, refusal=refusal)
        target = self.resolve(name, version)
        if isinstance(target, Refusal):
            q = target.quarantine
            refused = self._refused(name, q.version if q else (version or ""), q.origin if q else "", "", args, caller, turn_id, trace_id, target, sandbox, autonomy)
            return Call(invocation=refused, outcome=None, refusal=target)
        # The files may have changed since boot: check them again now.
        check = verify_executor(target.dir, self.verify_key)
        if not check.ok or check.digest != target.digest:
            bad = check.failure
            q = Quarantined(
                target.origin, target.name, target.version, target.dir,
                bad.file if bad else "manifest.sig",
                bad.check if bad else "identity",
                bad.detail if bad else "the signed files changed since boot",
            )
            refusal = Refusal(QUARANTINED, f"{name} {target.version} failed its check at call time: {q.reason}", q)
            refused = self._refused(name, target.version, target.origin, target.digest, args, caller, turn_id, trace_id, refusal, sandbox, autonomy)
            return Call(invocation=refused, outcome=None, refusal=refusal, executor=target)
        if target.origin == MCP_ORIGIN:
            changed = pin_problem(target.dir)
            if changed:
                q = Quarantined(target.origin, target.name, target.version, target.dir, SERVER_FILE, MCP_PIN_CHECK, changed)
                refusal = Refusal(QUARANTINED, f"{name} {target.version} failed its check at call time: {q.reason}", q)
                refused = self._refused(name, target.version, target.origin, target.digest, args, caller, turn_id, trace_id, refusal, sandbox, autonomy)
                return Call(invocation=refused, outcome=None, refusal=refusal, executor=target)
        try:
            env = self._call_env(target)
        except MetnosError as e:
            refusal = Refusal(CREDENTIAL_MISSING, str(e))
            refused = self._refused(name, target.version, target.origin, target.digest, args, caller, turn_id, trace_id, refusal, sandbox, autonomy)
            return Call(invocation=refused, outcome=None, refusal=refusal, executor=target)
        if not autonomy_levels.offers(autonomy, side_effects=target.manifest.contract.side_effects):
            refusal = Refusal(READ_ONLY_REFUSED, f"{name} declares side effects and the call runs at autonomy {autonomy}")
            refused = self._refused(name, target.version, target.origin, target.digest, args, caller, turn_id, trace_id, refusal, sandbox, autonomy)
            return Call(invocation=refused, outcome=None, refusal=refusal, executor=target)
        if target.manifest.device is not None:
            return self._call_remote(target, args, caller, turn_id, trace_id, autonomy)
        profile = autonomy_levels.sandbox_profile(autonomy, target.profile)
        if target.manifest.capabilities.fs_write_arguments:
            # What the call may change is then exactly what undo keeps a before-image of.
            profile = writes_narrowed_to_arguments(profile, args, target.input_schema, workspace=self.workspace, env=self.env)
        invocation_id = self.new_id()
        at = self.clock()
        invocation = Invocation.request(
            id=invocation_id, at=at, executor=target.name, version=target.version, origin=target.origin,
            digest=target.digest, args=args, args_hash=canonical_hash(args), caller=caller,
            turn_id=turn_id, trace_id=trace_id or str(invocation_id), autonomy=autonomy,
        )
        ctx = build_ctx(now=at.isoformat(), workspace=self.workspace, profile=profile,
                        name=target.name, version=target.version, config=self.config, env=self.env)
        # Undo needs the files as they were (DESIGN decision 6): kept just before the spawn.
        before = self.capture.before(target, args)
        outcome = invoke(target.dir, profile, args, target.input_schema, target.output_schema,
                         workspace=self.workspace, ctx=ctx, env=env)
        done = self.clock()
        mode = outcome.sandbox_mode or sandbox
        refused_before_spawn = outcome.kind == "NetworkDenied" and outcome.exit_code is None
        if outcome.kind in _BEFORE_SPAWN or refused_before_spawn or (outcome.kind == "SchemaViolation" and outcome.error.get("where") == "input"):
            invocation.refuse(kind=outcome.kind, error=outcome.error, at=done, sandbox=mode)
        else:
            if before:
                invocation.capture_files(before=before, at=at)
            invocation.complete(
                at=done, ok=outcome.ok, kind=outcome.kind or "ok", exit_code=outcome.exit_code,
                duration_ms=outcome.duration_ms, output_hash=outcome.output_sha and "blake3:" + outcome.output_sha,
                output_size=outcome.output_bytes, output=self._keep(outcome.output), error=outcome.error or None,
                stderr_tail=outcome.stderr_tail, network=list(outcome.network) or None, sandbox=mode,
            )
            if before:
                invocation.settle_files(after=self.capture.after(before), at=done)
        changed = _mcp_tool_changed(target, outcome)
        if changed is not None:
            # The server answered from inside the sandbox that the tool is no longer the one approved:
            # the call did not happen, and the executor is quarantined like one whose files changed.
            return Call(invocation=invocation, outcome=outcome, executor=target, quarantined=changed)
        return Call(invocation=invocation, outcome=outcome, executor=target)

    def _call_remote(self, target: LoadedExecutor, args: dict[str, Any], caller: dict[str, Any], turn_id: str | None,
                     trace_id: str | None, autonomy: str) -> Call:
        """The call on the device the manifest names, through the wired runner; recorded like a local one.

        The invocation's trace id is the remote call's: ``RemoteCall`` facts in the log (the "before"
        manifest, the device's "after" record) and the device's audit line carry it. The device keeps
        the before-images, so the invocation records none: undo goes through the device."""
        device = target.manifest.device
        invocation_id = self.new_id()
        at = self.clock()
        trace = trace_id or str(invocation_id)
        invocation = Invocation.request(
            id=invocation_id, at=at, executor=target.name, version=target.version, origin=target.origin,
            digest=target.digest, args=args, args_hash=canonical_hash(args), caller=caller,
            turn_id=turn_id, trace_id=trace, autonomy=autonomy,
        )
        where = f"device:{device}"
        try:
            if self.remote is None:
                raise RemoteRefused("remote-unwired", f"{target.name} runs on {device}, and this process cannot call devices; "
                                                      "run it from `metnos ask`, the daemon or `metnos executors run`")
            answer = self.remote(target, args, trace_id=trace, idempotency_id=str(invocation_id))
        except RemoteRefused as refused:
            done = self.clock()
            error = {"cause": refused.kind, "device": device, "message": str(refused)}
            if refused.kind in _REMOTE_MAY_HAVE_RUN:
                outcome = InvocationOutcome(ok=False, kind=REMOTE_FAILED, output=None, exit_code=None,
                                            duration_ms=_ms(at, done), stderr_tail="", output_sha=None, output_bytes=0,
                                            error=error, sandbox_mode=where)
                invocation.complete(at=done, ok=False, kind=REMOTE_FAILED, exit_code=None, duration_ms=outcome.duration_ms,
                                    output_hash=None, output_size=0, output=None, error=error, stderr_tail="", network=None,
                                    sandbox=where)
                return Call(invocation=invocation, outcome=outcome, executor=target)
            refusal = Refusal(REMOTE_REFUSED, str(refused), details=error)
            invocation.refuse(kind=REMOTE_REFUSED, error=error, at=done, sandbox=where)
            return Call(invocation=invocation, outcome=None, refusal=refusal, executor=target)
        done = self.clock()
        ok = bool(answer.get("ok"))
        output = answer.get("output") if ok else None
        error = dict(answer.get("error") or {})
        kind = None if ok else str(answer.get("kind") or "Failed")
        raw = canonical_json(output) if output is not None else b""
        outcome = InvocationOutcome(ok=ok, kind=kind, output=output, exit_code=None, duration_ms=_ms(at, done), stderr_tail="",
                                    output_sha=None, output_bytes=len(raw), error=error,
                                    layers=tuple(answer.get("layers") or ()), sandbox_mode=where)
        invocation.complete(
            at=done, ok=ok, kind=kind or "ok", exit_code=None, duration_ms=outcome.duration_ms, output_hash=None,
            output_size=len(raw), output=self._keep(output), error=error or None, stderr_tail="", network=None, sandbox=where,
        )
        return Call(invocation=invocation, outcome=outcome, executor=target)

    def _call_env(self, target: LoadedExecutor) -> dict[str, str] | None:
        """The environment of one call: an imported executor's credentials come from the vault, not the shell."""
        if target.origin != "skill":
            extra = self.seed_secrets(target) if self.seed_secrets is not None and target.origin == "seed" else {}
            if not extra:
                return self.env
            # The shell's own value of such a variable never reaches the call: only the vault's.
            return {**(os.environ if self.env is None else self.env), **extra}
        base = {k: v for k, v in (os.environ if self.env is None else self.env).items() if k not in target.profile.env}
        if self.credentials is None or not target.profile.env:
            return base
        return {**base, **self.credentials(target)}

    def _refused(
        self, name: str, version: str, origin: str, digest: str, args: dict[str, Any], caller: dict[str, Any],
        turn_id: str | None, trace_id: str | None, refusal: Refusal, sandbox: str, autonomy: str = autonomy_levels.DEFAULT,
    ) -> Invocation:
        """Refusals are audited too (seeds/000 ch. 5: "in all cases")."""
        invocation_id = self.new_id()
        at = self.clock()
        invocation = Invocation.request(
            id=invocation_id, at=at, executor=name, version=version, origin=origin, digest=digest,
            args=args, args_hash=canonical_hash(args), caller=caller, turn_id=turn_id,
            trace_id=trace_id or str(invocation_id), autonomy=autonomy,
        )
        invocation.refuse(kind=refusal.kind, error=refusal.details or {"message": refusal.message}, at=at, sandbox=sandbox)
        return invocation

    def _keep(self, output: dict[str, Any] | None) -> Any:
        if output is None:
            return None
        raw = canonical_json(output)
        if len(raw) <= INLINE_OUTPUT_LIMIT:
            return output
        return {"blob": self.blobs.put(raw), "size": len(raw)}

    def stored_output(self, recorded: Any) -> Any:
        """The observation an event recorded, fetched from the blob store if spilled."""
        if isinstance(recorded, dict) and set(recorded) == {"blob", "size"}:
            return orjson.loads(self.blobs.get(recorded["blob"]))
        return recorded


def _ms(start: datetime, end: datetime) -> int:
    return max(0, int((end - start).total_seconds() * 1000))
