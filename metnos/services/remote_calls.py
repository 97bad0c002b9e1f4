"""The server's side of a remote executor: push it, call it, replay and undo the call (docs/remote.md).

Every call is a trace: ``RemoteCall.CallPlanned`` (the "before" manifest) is
in the log before anything is sent; the device's answer, its "after" record,
is ``RemoteCall.CallAnswered``; a revoked device, a refused certificate, an
offline or slow device, a drift or a conflicting idempotency id end the step
as ``RemoteCall.CallRefused`` with the refusal's kind and message. A replay
reads the recorded answer and calls nothing; an undo asks the device to put
the call's paths back and records its answer.

``step_runner`` is what the Invoker calls for an executor whose manifest names
a device (``[executor] device``), inside a turn like anywhere else: the
device's address from the log, the executor pushed once for each version (an
``ExecutorPush.ExecutorPushed`` in the log), then ``call`` with the
invocation's trace id and idempotency id.
"""

from __future__ import annotations

import base64
from typing import Any

from eventsourcing.utils import get_topic

from domain.device import ExecutorPush, RemoteCall
from domain.remote import RemoteRefused, arguments_digest
from metnos.mechanisms.executors.loader import LoadedExecutor
from metnos.mechanisms.remote.tls import pinned_client_context, post_json
from metnos.services.devices import ensure_authority, list_devices

CALL_TIMEOUT_S = 30.0


def _context(rt: Any, device: dict[str, Any]):
    """The server's calling certificate, trusting the one device certificate the log paired under that name."""
    files = ensure_authority(rt.workspace)
    return pinned_client_context(device["certificate_pem"], files.caller_pem, files.caller_key)


def _device(rt: Any, name: str) -> dict[str, Any]:
    paired = [d for d in list_devices(rt) if d["name"] == name]
    if not paired:
        raise RemoteRefused("device-unknown", f"no device is paired as {name}; pair it with `metnos pair`")
    if paired[-1]["revoked"]:
        raise RemoteRefused("device-revoked", f"{name} was revoked; pair it again with `metnos pair` to call it")
    return paired[-1]


def _executor(rt: Any, name: str) -> LoadedExecutor:
    found = rt.report.get(name)
    if found is None:
        raise RemoteRefused("executor-unknown", f"there is no loaded executor named {name!r}; `metnos executors list` shows them")
    return found


def push(rt: Any, device: str, url: str, executor: str, *, timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
    """Send the signed executor's folder to the device, which verifies it before caching it; recorded."""
    paired = _device(rt, device)
    loaded = _executor(rt, executor)
    files = {str(p.relative_to(loaded.dir)): base64.b64encode(p.read_bytes()).decode()
             for p in sorted(loaded.dir.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    answer = post_json(url.rstrip("/") + "/executor", {"name": loaded.name, "digest": loaded.digest, "files": files},
                       _context(rt, paired), timeout)
    rt.log.save(ExecutorPush.pushed(id=rt.ids(), at=rt.clock(), device=device, device_fingerprint=paired["fingerprint"],
                                    executor=loaded.name, digest=loaded.digest, cached=str(answer.get("cached", ""))))
    return answer


def push_to(rt: Any, device: str, executor: str, *, timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
    """``metnos devices push``: push to the address the log holds for the device."""
    return push(rt, device, _address(_device(rt, device)), executor, timeout=timeout)


def pushed(rt: Any, fingerprint: str, executor: str, digest: str) -> bool:
    """Whether this version of the executor was pushed to the device holding that certificate."""
    topic = get_topic(ExecutorPush.ExecutorPushed)
    return any(e.device_fingerprint == fingerprint and e.executor == executor and e.digest == digest
               for _, e in rt.log.domain_events(1, topics=(topic,)))


def _address(paired: dict[str, Any]) -> str:
    if not paired.get("url"):
        name = paired["name"]
        raise RemoteRefused("device-address-unknown", f"the log holds no address for {name}; run `metnos device serve` on {name}, "
                                                      f"then `metnos devices address {name} URL` here with the URL it printed")
    return str(paired["url"])


def call(rt: Any, device: str, url: str, executor: str, arguments: dict[str, Any], *,
         idempotency_id: str | None = None, trace_id: str | None = None, push_first: bool = False,
         timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
    """Run ``executor`` on ``device``; the answer, or a RemoteRefused once its refusal is in the log.

    ``push_first``: push the executor before calling, unless the log says this version was pushed
    to this device already (a device that lost it since is a drift, refused naming the fix)."""
    trace_id = trace_id or rt.ids().hex
    idempotency_id = idempotency_id or rt.ids().hex
    paired = [d for d in list_devices(rt) if d["name"] == device]
    loaded = rt.report.get(executor)
    rt.log.save(RemoteCall.fact(
        RemoteCall.CallPlanned, id=rt.ids(), at=rt.clock(), trace_id=trace_id, idempotency_id=idempotency_id, device=device,
        device_fingerprint=paired[-1]["fingerprint"] if paired else "", url=url, executor=executor,
        digest=loaded.digest if loaded else "", arguments=arguments, arguments_sha256=arguments_digest(arguments)))
    try:
        target = _device(rt, device)
        _executor(rt, executor)
        if not url:
            _address(target)
        if push_first and not pushed(rt, target["fingerprint"], executor, loaded.digest):
            push(rt, device, url, executor, timeout=timeout)
        body = {"idempotency_id": idempotency_id, "trace_id": trace_id, "executor": executor,
                "digest": loaded.digest, "arguments": arguments}
        try:
            outcome = post_json(url.rstrip("/") + "/call", body, _context(rt, target), timeout)
        except RemoteRefused as refusal:
            if push_first and refusal.kind in ("executor-missing", "version-drift"):
                raise RemoteRefused(refusal.kind, f"{refusal}; the log says this version was pushed to {device}, which no "
                                                  f"longer holds it: run `metnos devices push {device} {executor}`") from refusal
            raise
    except RemoteRefused as refusal:
        rt.log.save(RemoteCall.fact(RemoteCall.CallRefused, id=rt.ids(), at=rt.clock(), trace_id=trace_id,
                                    kind=refusal.kind, message=str(refusal)))
        raise
    rt.log.save(RemoteCall.fact(RemoteCall.CallAnswered, id=rt.ids(), at=rt.clock(), trace_id=trace_id, outcome=outcome))
    return outcome


def trace(rt: Any, trace_id: str) -> list[Any]:
    """Every fact of one remote call, in log order."""
    topics = tuple(get_topic(e) for e in (RemoteCall.CallPlanned, RemoteCall.CallAnswered, RemoteCall.CallRefused,
                                          RemoteCall.CallUndone))
    return [e for _, e in rt.log.domain_events(1, topics=topics) if e.trace_id == trace_id]


def replay(rt: Any, trace_id: str) -> dict[str, Any]:
    """The call's outcome as recorded: a replay never reaches the device."""
    for event in trace(rt, trace_id):
        if isinstance(event, RemoteCall.CallAnswered):
            return event.outcome
        if isinstance(event, RemoteCall.CallRefused):
            raise RemoteRefused(event.kind, event.message)
    raise RemoteRefused("trace-unknown", f"the log holds no answered remote call with trace {trace_id}")


def undo(rt: Any, trace_id: str, *, url: str | None = None, force: bool = False,
         timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
    """Ask the device to put back the paths the call changed, and record its answer.

    ``url`` is where the device listens now (by default its address in the log, else where it was
    called). The device refuses when a path changed since the call (``undo-conflict``), unless ``force``."""
    planned = next((e for e in trace(rt, trace_id) if isinstance(e, RemoteCall.CallPlanned)), None)
    if planned is None:
        raise RemoteRefused("trace-unknown", f"the log holds no remote call with trace {trace_id}")
    target = _device(rt, planned.device)
    answer = post_json((url or target.get("url") or planned.url).rstrip("/") + "/undo", {"trace_id": trace_id, "force": force},
                       _context(rt, target), timeout)
    rt.log.save(RemoteCall.fact(RemoteCall.CallUndone, id=rt.ids(), at=rt.clock(), trace_id=trace_id, answer=answer))
    return answer


def step_runner(rt: Any):
    """What the Invoker calls for an executor whose manifest names a device (metnos/mechanisms/invocation/service.py)."""

    def run(executor: LoadedExecutor, arguments: dict[str, Any], *, trace_id: str, idempotency_id: str) -> dict[str, Any]:
        device = executor.manifest.device
        assert device is not None
        paired = [d for d in list_devices(rt) if d["name"] == device]
        url = (paired[-1]["url"] or "") if paired else ""
        # The device's own cap on the run, and time to push and to answer.
        timeout = executor.manifest.caps.max_duration_s + CALL_TIMEOUT_S
        return call(rt, device, url, executor.name, arguments, idempotency_id=idempotency_id, trace_id=trace_id,
                    push_first=True, timeout=timeout)

    return run
