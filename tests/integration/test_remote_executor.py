"""A remote executor end to end: a server and a device, each its own workspace and process, on 127.0.0.1.

The device is `metnos device serve` in its own process and home; the server's
side is driven through its service (metnos.services.remote_calls) on the
server's own runtime and log, not by a model.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from domain.device import RemoteCall
from domain.remote import RemoteRefused
from metnos.mechanisms.remote.certificates import Issued, issue, new_authority
from metnos.mechanisms.remote.server import CallServer
from metnos.mechanisms.remote.tls import client_context, post_json, server_context
from metnos.settings.workspace import Workspace
from tests.support.cli_process import Home
from tests.support.remote_homes import device_home, pair, serve, server_home, stop

NOTE = {"files": [{"path": "~/notes/remote.md", "content": "written on the laptop\n"}]}


@pytest.fixture
def homes(tmp_path: Path, initialised_workspace: Callable[[str], Path]) -> Iterator[tuple[Home, Home, str]]:
    server, device = server_home(tmp_path / "server", initialised_workspace), device_home(tmp_path / "device")
    pair(server, device)
    serving, url = serve(device)
    yield server, device, url
    stop(serving)


@pytest.fixture
def runtime(homes):
    from metnos.services import wiring

    server, _, _ = homes
    with wiring.boot(Workspace.from_env(server.env()), birth=False) as rt:
        yield rt


def _audit(device: Home) -> list[dict]:
    path = Workspace.from_env(device.env()).audit_dir / "device.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _refused(rt, kind: str, *call, **kw) -> RemoteRefused:
    from metnos.services import remote_calls

    with pytest.raises(RemoteRefused) as refused:
        remote_calls.call(rt, *call, **kw)
    assert refused.value.kind == kind, refused.value
    return refused.value


def _closed_port_url() -> str:
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        return f"https://127.0.0.1:{probe.getsockname()[1]}"


def _facts(rt) -> list:
    from metnos.services import remote_calls

    planned = [e for _, e in rt.log.domain_events(1) if isinstance(e, RemoteCall.CallPlanned)]
    return [(type(e).__name__, getattr(e, "kind", None)) for p in planned for e in remote_calls.trace(rt, p.trace_id)]


def test_a_pushed_executor_runs_on_the_device_is_replayed_from_the_log_and_undone_through_the_device(homes, runtime) -> None:
    from metnos.services import remote_calls

    server, device, url = homes
    note = device.user / "notes" / "remote.md"
    _refused(runtime, "executor-missing", "laptop", url, "write_files", NOTE)  # nothing pushed yet: the drift rule
    offline = _refused(runtime, "offline", "laptop", _closed_port_url(), "write_files", NOTE)
    assert "metnos device serve" in str(offline)

    assert remote_calls.push(runtime, "laptop", url, "write_files")["cached"] == "now"
    assert remote_calls.push(runtime, "laptop", url, "write_files")["cached"] == "already"
    outcome = remote_calls.call(runtime, "laptop", url, "write_files", NOTE, idempotency_id="note-1")
    assert outcome["ok"], outcome
    assert outcome["sandbox"] == "bwrap" and "bwrap" in outcome["layers"]  # the device's own sandbox ran it
    assert note.read_text() == "written on the laptop\n"
    assert [a["path"] for a in outcome["after"]] == [str(note)]

    facts = remote_calls.trace(runtime, outcome["trace_id"])
    assert [type(e).__name__ for e in facts] == ["CallPlanned", "CallAnswered"]
    assert facts[0].digest == runtime.report.get("write_files").digest and facts[0].device == "laptop"
    assert facts[1].outcome["after"] == outcome["after"]
    calls = [a for a in _audit(device) if a["fact"] == "call"]
    assert [(a["trace_id"], a["idempotency_id"]) for a in calls] == [(outcome["trace_id"], "note-1")]

    # The same id again is answered from the device's record, and does not run twice.
    assert remote_calls.call(runtime, "laptop", url, "write_files", NOTE, idempotency_id="note-1")["ok"]
    assert len([a for a in _audit(device) if a["fact"] == "call"]) == 1
    note.unlink()
    assert remote_calls.replay(runtime, outcome["trace_id"]) == outcome  # read from the log: nothing is called
    assert not note.exists() and len([a for a in _audit(device) if a["fact"] == "call"]) == 1

    # A restarted device still answers the id from its record (kept on disk), and undoes from its own images.
    note.write_text("written on the laptop\n")
    restarted, moved = serve(device)
    try:
        assert remote_calls.call(runtime, "laptop", moved, "write_files", NOTE, idempotency_id="note-1")["ok"]
        assert len([a for a in _audit(device) if a["fact"] == "call"]) == 1
        undone = remote_calls.undo(runtime, outcome["trace_id"], url=moved)
    finally:
        stop(restarted)
    assert undone["restored"] == [str(note)] and not note.exists() and not note.parent.exists()
    assert type(remote_calls.trace(runtime, outcome["trace_id"])[-1]).__name__ == "CallUndone"
    assert [a["fact"] for a in _audit(device)][-1] == "undo"


def test_each_attack_is_refused_and_recorded(homes, runtime, tmp_path: Path) -> None:
    from metnos.services import devices, remote_calls

    server, device, url = homes
    remote_calls.push(runtime, "laptop", url, "write_files")
    remote_calls.call(runtime, "laptop", url, "write_files", NOTE, idempotency_id="note-1")
    server_ca = Workspace.from_env(server.env()).keys_dir / "remote" / "ca.pem"

    # A replayed idempotency id with other arguments.
    other = {"files": [{"path": "~/notes/other.md", "content": "x"}]}
    _refused(runtime, "idempotency-conflict", "laptop", url, "write_files", other, idempotency_id="note-1")
    assert not (device.user / "notes" / "other.md").exists()

    # A call without a client certificate, and one with a certificate from another CA.
    with pytest.raises(RemoteRefused) as bare:
        post_json(url + "/call", {"idempotency_id": "x", "trace_id": "x"}, client_context(server_ca, None, None), 5)
    assert bare.value.kind == "certificate-refused"
    stranger = new_authority("stranger")
    issue(stranger, "intruder", server=False).write(tmp_path / "intruder.pem", tmp_path / "intruder.key")
    with pytest.raises(RemoteRefused) as foreign:
        post_json(url + "/call", {"idempotency_id": "y", "trace_id": "y"},
                  client_context(server_ca, tmp_path / "intruder.pem", tmp_path / "intruder.key"), 5)
    assert foreign.value.kind == "certificate-refused"

    # A man in the middle with a self-signed certificate.
    stranger.write(tmp_path / "mitm-ca.pem", tmp_path / "mitm-ca.key")
    issue(stranger, "laptop", server=True).write(tmp_path / "mitm.pem", tmp_path / "mitm.key")
    mitm = CallServer(server_context(tmp_path / "mitm-ca.pem", tmp_path / "mitm.pem", tmp_path / "mitm.key"),
                      lambda call: {"ok": True}).start()
    try:
        _refused(runtime, "certificate-refused", "laptop", mitm.url.removesuffix("/call"), "write_files", NOTE)
    finally:
        mitm.stop()
    assert mitm.runs == 0

    # A listener with a certificate the instance CA did sign, but not the one paired as this device.
    server_keys = Workspace.from_env(server.env()).keys_dir / "remote"
    sibling = issue(Issued(server_ca.read_bytes(), (server_keys / "ca.key").read_bytes()), "laptop", server=True)
    sibling.write(tmp_path / "sibling.pem", tmp_path / "sibling.key")
    impostor = CallServer(server_context(server_ca, tmp_path / "sibling.pem", tmp_path / "sibling.key"),
                          lambda call: {"ok": True}).start()
    try:
        _refused(runtime, "certificate-refused", "laptop", impostor.url.removesuffix("/call"), "write_files", NOTE)
    finally:
        impostor.stop()
    assert impostor.runs == 0

    # A tampered executor on the device.
    cached = next((Workspace.from_env(device.env()).data_dir / "device" / "executors" / "write_files").glob("blake3-*"))
    with (cached / "main.py").open("a") as main:
        main.write("\n# changed on the device\n")
    _refused(runtime, "executor-tampered", "laptop", url, "write_files", other)
    assert not (device.user / "notes" / "other.md").exists()

    # A revoked device.
    devices.revoke(runtime, "laptop")
    _refused(runtime, "device-revoked", "laptop", url, "write_files", other)

    assert _facts(runtime) == [
        ("CallPlanned", None), ("CallAnswered", None),
        ("CallPlanned", None), ("CallRefused", "idempotency-conflict"),
        ("CallPlanned", None), ("CallRefused", "certificate-refused"),
        ("CallPlanned", None), ("CallRefused", "certificate-refused"),
        ("CallPlanned", None), ("CallRefused", "executor-tampered"),
        ("CallPlanned", None), ("CallRefused", "device-revoked"),
    ]
    refused = [(a["fact"], a["kind"]) for a in _audit(device) if a["fact"] in ("refused", "call-refused")]
    assert refused == [("refused", "idempotency-conflict"), ("refused", "certificate-refused"),
                       ("refused", "certificate-refused"), ("call-refused", "executor-tampered"),
                       ("refused", "executor-tampered")]
    shutil.rmtree(cached)
