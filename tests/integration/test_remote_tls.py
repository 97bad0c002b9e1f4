"""Mutual TLS between a caller and a device listener in a separate process on 127.0.0.1."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from domain.remote import RemoteRefused
from metnos.mechanisms.remote.certificates import fingerprint, issue, new_authority
from metnos.mechanisms.remote.tls import client_context, post_json

ROOT = Path(__file__).resolve().parents[2]


def _device(folder: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(folder)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.remote_device", str(folder)], stdout=subprocess.PIPE, text=True, env=env
    )
    return process, process.stdout.readline().strip()


@pytest.fixture
def instance(tmp_path):
    """The server's CA, the device's listener certificate and a paired client certificate."""
    device_dir = tmp_path / "device"
    server_dir = tmp_path / "server"
    authority = new_authority("home")
    authority.write(server_dir / "ca.pem", server_dir / "ca.key")
    (device_dir).mkdir()
    (device_dir / "ca.pem").write_bytes(authority.certificate_pem)
    issue(authority, "laptop", server=True).write(device_dir / "device.pem", device_dir / "device.key")
    client = issue(authority, "server-client", server=False)
    client.write(server_dir / "client.pem", server_dir / "client.key")
    return authority, server_dir, device_dir, client


@pytest.fixture
def device(instance):
    _, _, device_dir, _ = instance
    process, url = _device(device_dir)
    yield url
    process.terminate()
    process.wait(timeout=10)


def _call(url, server_dir, idempotency_id="call-1", arguments=None, cert=True, ca=None, timeout=5.0):
    context = client_context(
        ca or server_dir / "ca.pem",
        server_dir / "client.pem" if cert else None,
        server_dir / "client.key" if cert else None,
    )
    body = {"idempotency_id": idempotency_id, "trace_id": "trace-1", "arguments": arguments or {"path": "a"}}
    return post_json(url, body, context, timeout)


def test_keys_are_owner_only(instance):
    _, server_dir, device_dir, _ = instance
    for path in (server_dir / "ca.key", server_dir / "client.key", device_dir / "device.key"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_paired_call_runs_once_per_idempotency_id(instance, device):
    _, server_dir, device_dir, _ = instance
    first = _call(device, server_dir)
    assert first == {"trace_id": "trace-1", "echo": {"path": "a"}}
    assert _call(device, server_dir) == first
    assert (device_dir / "runs").read_text() == "1"


def test_same_idempotency_id_with_other_arguments_refused(instance, device):
    _, server_dir, device_dir, _ = instance
    _call(device, server_dir)
    with pytest.raises(RemoteRefused) as refused:
        _call(device, server_dir, arguments={"path": "b"})
    assert refused.value.kind == "idempotency-conflict"
    assert (device_dir / "runs").read_text() == "1"


def test_call_without_client_certificate_refused(instance, device):
    _, server_dir, device_dir, _ = instance
    with pytest.raises(RemoteRefused) as refused:
        _call(device, server_dir, cert=False)
    assert refused.value.kind == "certificate-refused"
    assert not (device_dir / "runs").exists()


def test_client_certificate_from_another_ca_refused(instance, device, tmp_path):
    _, server_dir, device_dir, _ = instance
    other = issue(new_authority("stranger"), "intruder", server=False)
    other.write(server_dir / "client.pem", server_dir / "client.key")
    with pytest.raises(RemoteRefused) as refused:
        _call(device, server_dir)
    assert refused.value.kind == "certificate-refused"
    assert not (device_dir / "runs").exists()


def test_man_in_the_middle_with_self_signed_certificate_refused(instance, tmp_path):
    authority, server_dir, _, _ = instance
    impostor_dir = tmp_path / "impostor"
    impostor_dir.mkdir()
    impostor_ca = new_authority("impostor")
    # The impostor trusts the real CA for clients, so only the caller's pinning can stop it.
    (impostor_dir / "ca.pem").write_bytes(authority.certificate_pem)
    issue(impostor_ca, "laptop", server=True).write(impostor_dir / "device.pem", impostor_dir / "device.key")
    process, url = _device(impostor_dir)
    try:
        with pytest.raises(RemoteRefused) as refused:
            _call(url, server_dir)
        assert refused.value.kind == "certificate-refused"
        assert "not signed by this instance's CA" in str(refused.value)
        assert not (impostor_dir / "runs").exists()
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_revoked_client_certificate_refused(instance):
    _, server_dir, device_dir, client = instance
    (device_dir / "revoked").write_text(fingerprint(client.certificate_pem))
    process, url = _device(device_dir)
    try:
        with pytest.raises(RemoteRefused) as refused:
            _call(url, server_dir)
        assert refused.value.kind == "device-revoked"
        assert not (device_dir / "runs").exists()
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_offline_device_is_a_structured_error(instance, tmp_path):
    _, server_dir, _, _ = instance
    with pytest.raises(RemoteRefused) as refused:
        _call("https://127.0.0.1:9/call", server_dir)
    assert refused.value.kind == "offline"
    assert "metnos device serve" in str(refused.value)


def test_silent_device_is_a_timeout(instance):
    import socket

    _, server_dir, _, _ = instance
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        with pytest.raises(RemoteRefused) as refused:
            _call(f"https://127.0.0.1:{silent.getsockname()[1]}/call", server_dir, timeout=0.5)
        assert refused.value.kind == "timeout"
    finally:
        silent.close()


def test_a_handler_that_fails_answers_a_structured_device_error_not_a_dropped_connection(instance):
    from metnos.mechanisms.remote.server import CallServer
    from metnos.mechanisms.remote.tls import server_context

    _, server_dir, device_dir, _ = instance
    listener = CallServer(server_context(device_dir / "ca.pem", device_dir / "device.pem", device_dir / "device.key"),
                          lambda call: {"share": 1 / 0}).start()
    try:
        with pytest.raises(RemoteRefused) as failed:
            _call(listener.url, server_dir)
    finally:
        listener.stop()
    assert failed.value.kind == "device-error" and "ZeroDivisionError" in str(failed.value)
    assert listener.refusals == [failed.value.as_record()] and listener.runs == 0


def test_a_call_larger_than_a_device_reads_is_refused_with_its_reason(instance, device):
    from metnos.mechanisms.remote.server import MAX_BODY_BYTES

    _, server_dir, _, _ = instance
    with pytest.raises(RemoteRefused) as large:
        _call(device, server_dir, idempotency_id="big", arguments={"blob": "x" * (MAX_BODY_BYTES + 1)}, timeout=30)
    assert large.value.kind == "call-too-large"
