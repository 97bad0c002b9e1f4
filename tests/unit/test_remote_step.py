"""A step on a device (docs/remote.md): the manifest's ``device``, and how the Invoker records a remote call.

The device itself is not here: a stand-in runner answers or refuses as
metnos.services.remote_calls would, so each way a remote step can end is
checked for what the invocation records and what the planner is shown.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from nacl.signing import SigningKey

from domain.invocation import Invocation
from domain.remote import RemoteRefused
from metnos.mechanisms.executors.loader import load_executors
from metnos.mechanisms.executors.manifest import ManifestError, load_manifest
from metnos.mechanisms.executors.signing import sign_executor
from metnos.mechanisms.invocation.outcome import failure_observation
from metnos.mechanisms.invocation.service import Invoker
from metnos.settings.workspace import Workspace
from tests.unit.executor_kit import write_executor


def _on_device(d: Path, device: str = "laptop") -> Path:
    manifest = d / "manifest.toml"
    manifest.write_text(manifest.read_text().replace("[executor]\n", f'[executor]\ndevice = "{device}"\n', 1))
    return d


def test_a_manifest_names_its_device_by_a_paired_name_and_none_runs_here(tmp_path: Path) -> None:
    assert load_manifest(_on_device(write_executor(tmp_path / "a")) / "manifest.toml").device == "laptop"
    assert load_manifest(write_executor(tmp_path / "b") / "manifest.toml").device is None
    with pytest.raises(ManifestError) as bad:
        load_manifest(_on_device(write_executor(tmp_path / "c"), "Laptop 1") / "manifest.toml")
    assert bad.value.field == "executor.device" and "metnos devices list" in str(bad.value)


@pytest.fixture
def invoker(tmp_path: Path) -> Invoker:
    key = SigningKey.generate()
    workspace = Workspace(data_dir=tmp_path / "data", config_dir=tmp_path / "config")
    folder = _on_device(write_executor(workspace.executors_origin_dir("seed") / "get_word" / "1.0.0"))
    (folder.parent / "CURRENT").write_text("1.0.0\n")
    sign_executor(folder, key)
    report = load_executors(workspace, key.verify_key, birth=False)
    assert report.get("get_word") is not None, report
    return Invoker(workspace=workspace, report=report, verify_key=key.verify_key,
                   clock=lambda: datetime(2026, 11, 29, tzinfo=timezone.utc), new_id=uuid4)


def _events(call: Any) -> list[Any]:
    return list(call.invocation.pending_events)


def test_an_answer_from_the_device_is_the_invocations_outcome_under_the_remote_trace(invoker: Invoker) -> None:
    seen: dict[str, Any] = {}

    def device(executor, arguments, *, trace_id, idempotency_id):
        seen.update(executor=executor.name, arguments=arguments, trace_id=trace_id, idempotency_id=idempotency_id)
        return {"ok": True, "kind": None, "output": {"ok": True, "word": "hi"}, "error": {}, "layers": ["bwrap"],
                "before": [], "after": []}

    invoker.remote = device
    call = invoker.call("get_word", {"word": "hi"}, caller={"kind": "test"})
    requested, completed = _events(call)
    assert call.ok and call.observation() == {"ok": True, "word": "hi"}
    assert seen == {"executor": "get_word", "arguments": {"word": "hi"}, "trace_id": requested.trace_id,
                    "idempotency_id": str(requested.originator_id)}
    assert isinstance(completed, Invocation.InvocationCompleted) and completed.sandbox == "device:laptop"
    assert completed.output == {"ok": True, "word": "hi"}


@pytest.mark.parametrize(("cause", "kind", "event"), [
    ("offline", "RemoteRefused", Invocation.InvocationRefused),
    ("certificate-refused", "RemoteRefused", Invocation.InvocationRefused),
    ("version-drift", "RemoteRefused", Invocation.InvocationRefused),
    ("device-revoked", "RemoteRefused", Invocation.InvocationRefused),
    # It may have run there: not a refusal, a failure (undo still asks the device).
    ("timeout", "RemoteFailed", Invocation.InvocationCompleted),
])
def test_a_device_that_cannot_run_the_step_ends_it_with_a_structured_error_naming_cause_and_fix(invoker: Invoker, cause, kind,
                                                                                                 event) -> None:
    def device(executor, arguments, **_ids):
        raise RemoteRefused(cause, f"{cause} on laptop; the fix for it")

    invoker.remote = device
    call = invoker.call("get_word", {"word": "hi"}, caller={"kind": "test"})
    recorded = _events(call)[-1]
    assert not call.ok and isinstance(recorded, event)
    error = {"cause": cause, "device": "laptop", "message": f"{cause} on laptop; the fix for it"}
    assert recorded.kind == kind and recorded.error == error
    assert call.observation() == {"ok": False, "error": {"kind": kind, **error}}
    # What replay rebuilds from the recorded event is what the planner was shown (replay/ports.py).
    if event is Invocation.InvocationCompleted:
        assert failure_observation(recorded.kind, recorded.error, recorded.stderr_tail) == call.observation()
    else:
        assert {"ok": False, "error": {"kind": recorded.kind, **recorded.error}} == call.observation()


def test_a_runtime_not_wired_to_call_devices_refuses_the_step_naming_where_it_can_run(invoker: Invoker) -> None:
    call = invoker.call("get_word", {"word": "hi"}, caller={"kind": "test"})
    assert not call.ok and call.observation()["error"]["cause"] == "remote-unwired"
    assert "metnos ask" in call.observation()["error"]["message"]


def test_the_device_finds_a_path_changed_since_the_call_before_it_puts_anything_back(tmp_path: Path) -> None:
    from metnos.mechanisms.filestate import take
    from metnos.services.device_host import _changed_since

    note = tmp_path / "note.md"
    before = [{"path": str(note), "node": take(note)}]  # missing before the call
    note.write_text("written by the call\n")
    after = [{"path": str(note), "node": take(note)}]
    assert _changed_since(before, after) == []  # as the call left it
    note.write_text("changed by hand since\n")
    assert _changed_since(before, after) == [str(note)]
    note.unlink()
    assert _changed_since(before, after) == []  # as it was before: nothing to put back, nothing lost
    assert _changed_since(before, None) == []  # images kept before the check: no after to compare with
