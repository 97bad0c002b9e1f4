"""A planner turn whose executor runs on a paired device (docs/remote.md, "A step on a device").

Two Metnos workspaces, each its own process and HOME on 127.0.0.1: the server
runs `metnos ask` against a scripted model; its `write_files` is a version whose
manifest says ``device = "laptop"``; the device is `metnos device serve`. The
turn's step goes through the device (pushed once, called with the invocation's
trace id), is replayed from the log with the device stopped, and undone through
the device. A device offline ends the turn failed, never answered; a revoked
device is refused by the server, and told, refuses the server's calls itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from domain.device import ExecutorPush, RemoteCall
from domain.invocation import Invocation
from domain.remote import RemoteRefused
from domain.turn import Turn
from metnos.settings.workspace import Workspace
from tests.support.cli_process import Home
from tests.support.remote_homes import device_home, pair, place_on_device, serve, server_home, stop
from tests.support.scripted_llm import ScriptedLLM, call, text

REQUEST = "write 'written on the laptop' to ~/notes/remote.md"
NOTE = {"files": [{"path": "~/notes/remote.md", "content": "written on the laptop\n"}]}


@pytest.fixture
def homes(tmp_path: Path, initialised_workspace: Callable[[str], Path]) -> Iterator[tuple[Home, Home]]:
    server, device = server_home(tmp_path / "server", initialised_workspace), device_home(tmp_path / "device")
    pair(server, device)
    place_on_device(server, "write_files")
    yield server, device


def _ask(server: Home, script: list) -> dict:
    with ScriptedLLM(script) as llm:
        done = server.run("ask", REQUEST, "--yes", "--json", timeout=180, METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted")
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


def _audit(device: Home) -> list[dict]:
    path = Workspace.from_env(device.env()).audit_dir / "device.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _address(server: Home, url: str) -> None:
    done = server.run("devices", "address", "laptop", url, "--json")
    assert done.returncode == 0, done.stderr


def _log(server: Home) -> list:
    from eventsourcing.persistence import Transcoder  # noqa: F401 - the log is read through the runtime below
    from metnos.services import wiring

    with wiring.boot(Workspace.from_env(server.env()), birth=False) as rt:
        return [e for _, e in rt.log.domain_events(1)]


def _turn(events: list, turn_id: str) -> list:
    return [e for e in events if str(e.originator_id) == turn_id]


def test_a_turn_runs_its_step_on_the_device_replays_from_the_log_and_is_undone_through_the_device(homes) -> None:
    server, device = homes
    note, not_here = device.user / "notes" / "remote.md", server.user / "notes" / "remote.md"
    serving, url = serve(device)
    try:
        _address(server, url)
        answered = _ask(server, [call("write_files", NOTE), text("Saved the note on the laptop.")])
    finally:
        stop(serving)
    assert answered["status"] == "answered", answered
    assert note.read_text() == "written on the laptop\n" and not not_here.exists()

    events = _log(server)
    invoked = next(e for e in _turn(events, answered["turn_id"]) if isinstance(e, Turn.StepInvoked))
    assert invoked.ok and invoked.executor == "write_files" and invoked.version == "1.1.0"
    invocation = [e for e in events if str(e.originator_id) == invoked.invocation_id]
    trace_id = invocation[0].trace_id
    completed = next(e for e in invocation if isinstance(e, Invocation.InvocationCompleted))
    assert completed.sandbox == "device:laptop" and completed.ok
    assert not any(isinstance(e, Invocation.FilesCaptured) for e in invocation)  # the before-images are the device's
    # The "before" manifest and the device's "after" record, in the server's log under the invocation's trace id.
    facts = [e for e in events if isinstance(e, (RemoteCall.CallPlanned, RemoteCall.CallAnswered)) and e.trace_id == trace_id]
    assert [type(e).__name__ for e in facts] == ["CallPlanned", "CallAnswered"]
    assert facts[0].device == "laptop" and facts[0].idempotency_id == invoked.invocation_id and facts[0].arguments == NOTE
    assert [a["path"] for a in facts[1].outcome["after"]] == [str(note)]
    assert facts[1].outcome["before"][0]["node"]["type"] == "missing"
    assert [(e.device, e.executor, e.cached) for e in events if isinstance(e, ExecutorPush.ExecutorPushed)] == [
        ("laptop", "write_files", "now")]
    assert [a["trace_id"] for a in _audit(device) if a["fact"] == "call"] == [trace_id]

    # Replay reads the recorded outcome: the device is stopped, and nothing reaches it.
    calls_before = len(_audit(device))
    replayed = server.run("replay", answered["turn_id"], "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)
    assert (report["turns"], report["diverged"]) == (1, 0), report
    assert len(_audit(device)) == calls_before

    # Undo asks the device, which puts its file back from its own before-image.
    serving, moved = serve(device)
    try:
        _address(server, moved)
        undone = server.run("undo", "--json")
    finally:
        stop(serving)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    result = json.loads(undone.stdout)
    assert result["status"] == "undone", result
    assert [(r["device"], r["paths"]) for r in result["remote"]] == [("laptop", [str(note)])], result
    assert [(r["device"], r["path"]) for r in result["restored"]] == [("laptop", str(note))], result
    assert not note.exists()
    assert [type(e).__name__ for e in _log(server) if isinstance(e, RemoteCall.CallUndone) and e.trace_id == trace_id] == ["CallUndone"]
    assert [a["fact"] for a in _audit(device)][-1] == "undo"


def test_an_offline_device_fails_the_turn_and_a_revoked_one_is_refused_by_the_server_and_refuses_it(homes) -> None:
    from metnos.mechanisms.remote.tls import pinned_client_context, post_json
    from metnos.services import devices, wiring

    server, device = homes
    note = device.user / "notes" / "remote.md"
    _address(server, "https://127.0.0.1:9")  # nothing listens there
    failed = _ask(server, [call("write_files", NOTE), text("Saved the note on the laptop.")])
    assert failed["status"] == "failed", failed
    assert "could not run on its device" in failed["failure"]["message"] and "metnos device serve" in failed["failure"]["message"]
    events = _log(server)
    invoked = next(e for e in _turn(events, failed["turn_id"]) if isinstance(e, Turn.StepInvoked))
    refused = next(e for e in events if str(e.originator_id) == invoked.invocation_id and isinstance(e, Invocation.InvocationRefused))
    assert refused.kind == "RemoteRefused" and refused.error["cause"] == "offline" and refused.error["device"] == "laptop"
    assert not note.exists()

    serving, url = serve(device)
    try:
        with wiring.boot(Workspace.from_env(server.env()), birth=False) as rt:
            devices.set_address(rt, "laptop", url)
            revoked = devices.revoke(rt, "laptop")
            assert revoked["device_told"] == {"told": True}
            # The server refuses to use it, before anything is sent.
            with pytest.raises(RemoteRefused) as by_server:
                from metnos.services import remote_calls

                remote_calls.step_runner(rt)(rt.report.get("write_files"), NOTE, trace_id="t-revoked", idempotency_id="i-revoked")
            assert by_server.value.kind == "device-revoked" and "metnos pair" in str(by_server.value)
            # And the device, told, refuses the server's own certificate from now on.
            files = devices.ensure_authority(rt.workspace)
            paired = devices.list_devices(rt)[-1]
            context = pinned_client_context(paired["certificate_pem"], files.caller_pem, files.caller_key)
            with pytest.raises(RemoteRefused) as by_device:
                post_json(url + "/call", {"idempotency_id": "x", "trace_id": "x", "executor": "write_files", "arguments": NOTE},
                          context, 10)
            assert by_device.value.kind == "device-revoked"
    finally:
        stop(serving)
    assert [a["fact"] for a in _audit(device) if a["fact"] in ("revoked", "refused")] == ["revoked", "refused"]
    assert not note.exists()
