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


def _runtime(server: Home):
    from metnos.services import wiring

    return wiring.boot(Workspace.from_env(server.env()), birth=False)


def _turn(events: list, turn_id: str) -> list:
    return [e for e in events if str(e.originator_id) == turn_id]


def _invocation(events: list, turn_id: str) -> list:
    invoked = next(e for e in _turn(events, turn_id) if isinstance(e, Turn.StepInvoked))
    return [invoked, *(e for e in events if str(e.originator_id) == invoked.invocation_id)]


def test_a_turn_runs_its_step_on_the_device_replays_from_the_log_and_is_undone_through_the_device(homes) -> None:
    from metnos.mechanisms.remote.tls import pinned_client_context, post_json
    from metnos.services import devices, remote_calls

    server, device = homes
    note, not_here = device.user / "notes" / "remote.md", server.user / "notes" / "remote.md"
    script = [call("write_files", NOTE), text("Saved the note on the laptop.")]

    # A device offline ends the step with a structured error naming cause and fix, and the turn is not answered.
    with _runtime(server) as rt:
        devices.set_address(rt, "laptop", "https://127.0.0.1:9")  # nothing listens there
    failed = _ask(server, script)
    assert failed["status"] == "failed", failed
    assert "could not run on its device" in failed["failure"]["message"] and "metnos device serve" in failed["failure"]["message"]

    serving, url = serve(device)
    try:
        with _runtime(server) as rt:
            devices.set_address(rt, "laptop", url)
        answered = _ask(server, script)
        assert answered["status"] == "answered", answered
        assert note.read_text() == "written on the laptop\n" and not not_here.exists()

        with _runtime(server) as rt:
            events = [e for _, e in rt.log.domain_events(1)]
        invoked, *invocation = _invocation(events, failed["turn_id"])
        refused = next(e for e in invocation if isinstance(e, Invocation.InvocationRefused))
        assert refused.kind == "RemoteRefused" and (refused.error["cause"], refused.error["device"]) == ("offline", "laptop")

        invoked, *invocation = _invocation(events, answered["turn_id"])
        assert invoked.ok and invoked.executor == "write_files" and invoked.version == "1.1.0"
        trace_id = invocation[0].trace_id
        completed = next(e for e in invocation if isinstance(e, Invocation.InvocationCompleted))
        assert completed.sandbox == "device:laptop" and completed.ok
        assert not any(isinstance(e, Invocation.FilesCaptured) for e in invocation)  # the before-images are the device's
        # The "before" manifest and the device's "after" record, in the server's log under the invocation's trace id.
        facts = [e for e in events if isinstance(e, (RemoteCall.CallPlanned, RemoteCall.CallAnswered)) and e.trace_id == trace_id]
        assert [type(e).__name__ for e in facts] == ["CallPlanned", "CallAnswered"]
        assert facts[0].device == "laptop" and facts[0].idempotency_id == invoked.invocation_id and facts[0].arguments == NOTE
        assert facts[1].outcome["before"][0]["node"]["type"] == "missing"
        assert [a["path"] for a in facts[1].outcome["after"]] == [str(note)]
        assert [(e.device, e.executor, e.cached) for e in events if isinstance(e, ExecutorPush.ExecutorPushed)] == [
            ("laptop", "write_files", "now")]  # pushed once, at the first call that reached the device
        assert [a["trace_id"] for a in _audit(device) if a["fact"] == "call"] == [trace_id]

        # Replay reads the recorded outcomes: the device is up, and nothing reaches it.
        seen = len(_audit(device))
        replayed = server.run("replay", "--all", "--json")
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        report = json.loads(replayed.stdout)
        assert report["diverged"] == 0 and {r["turn_id"] for r in report["results"]} >= {failed["turn_id"], answered["turn_id"]}, report
        assert len(_audit(device)) == seen

        # Undo asks the device, which puts its file back from its own before-image.
        undone = server.run("undo", answered["turn_id"], "--json")
        assert undone.returncode == 0, undone.stdout + undone.stderr
        result = json.loads(undone.stdout)
        assert result["status"] == "undone", result
        assert [(r["device"], r["paths"]) for r in result["remote"]] == [("laptop", [str(note)])], result
        assert [(r["device"], r["path"]) for r in result["restored"]] == [("laptop", str(note))], result
        assert not note.exists()
        assert [a["fact"] for a in _audit(device)][-1] == "undo"

        with _runtime(server) as rt:
            assert [type(e).__name__ for e in remote_calls.trace(rt, trace_id)] == ["CallPlanned", "CallAnswered", "CallUndone"]
            # A device that lost the version the log says it was pushed: a drift, refused naming the fix, which works.
            cached = Workspace.from_env(device.env()).data_dir / "device" / "executors" / "write_files" / "CURRENT"
            cached.unlink()
            with pytest.raises(RemoteRefused) as drifted:
                remote_calls.step_runner(rt)(rt.report.get("write_files"), NOTE, trace_id="t-drift", idempotency_id="i-drift")
            assert drifted.value.kind == "executor-missing" and "metnos devices push laptop write_files" in str(drifted.value)
            assert remote_calls.push_to(rt, "laptop", "write_files")["cached"] == "now" and cached.is_file()
            # A revoked device: the server refuses to use it before anything is sent, and tells the device.
            assert devices.revoke(rt, "laptop")["device_told"] == {"told": True}
            with pytest.raises(RemoteRefused) as by_server:
                remote_calls.step_runner(rt)(rt.report.get("write_files"), NOTE, trace_id="t-revoked", idempotency_id="i-revoked")
            assert by_server.value.kind == "device-revoked" and "metnos pair" in str(by_server.value)
            # The device, told, refuses the server's own certificate from then on.
            files = devices.ensure_authority(rt.workspace)
            context = pinned_client_context(devices.list_devices(rt)[-1]["certificate_pem"], files.caller_pem, files.caller_key)
            with pytest.raises(RemoteRefused) as by_device:
                post_json(url + "/call", {"idempotency_id": "x", "trace_id": "x", "executor": "write_files", "arguments": NOTE},
                          context, 10)
            assert by_device.value.kind == "device-revoked"
    finally:
        stop(serving)
    assert [(a["fact"], a.get("kind")) for a in _audit(device) if a["fact"] in ("revoked", "refused")] == [
        ("refused", "executor-missing"), ("revoked", None), ("refused", "device-revoked")]
    # Kept beside its keys, so a restarted `device serve` refuses the server too (until it is paired anew).
    assert (Workspace.from_env(device.env()).keys_dir / "device" / "revoked.json").is_file()
    assert not note.exists()
