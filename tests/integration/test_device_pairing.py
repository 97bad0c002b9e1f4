"""Pairing a device with `metnos pair`: two workspaces as separate processes on 127.0.0.1."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography import x509
from eventsourcing.utils import get_topic

from domain.device import DevicePairingCode, DeviceRevocation, PairedDevice
from domain.remote import RemoteRefused
from metnos.mechanisms.remote.certificates import fingerprint, new_request
from metnos.settings.workspace import Workspace
from tests.support.cli_process import Home
from tests.support.remote_homes import device_home, pair, server_home


@pytest.fixture
def server(tmp_path: Path, initialised_workspace: Callable[[str], Path]) -> Home:
    return server_home(tmp_path / "server", initialised_workspace)


@pytest.fixture
def device(tmp_path: Path) -> Home:
    return device_home(tmp_path / "device")


def test_a_device_pairs_with_a_code_gets_a_certificate_from_the_instance_ca_kept_0600_and_is_revoked_by_an_event(
        server: Home, device: Home) -> None:
    paired = pair(server, device)

    keys = Workspace.from_env(device.env()).keys_dir / "device"
    for name in ("device.key", "device.pem", "ca.pem", "instance.pub", "pairing.json"):
        assert stat.S_IMODE((keys / name).stat().st_mode) == 0o600, name
    ca = x509.load_pem_x509_certificate((keys / "ca.pem").read_bytes())
    certificate = x509.load_pem_x509_certificate((keys / "device.pem").read_bytes())
    certificate.verify_directly_issued_by(ca)
    assert fingerprint((keys / "ca.pem").read_bytes()) == paired["ca_fingerprint"]
    server_keys = Workspace.from_env(server.env()).keys_dir
    assert (keys / "instance.pub").read_text() == (server_keys / "instance.pub").read_text()

    listed = json.loads(server.run("devices", "list", "--json").stdout)
    assert [(d["name"], d["fingerprint"], d["revoked"]) for d in listed] == [("laptop", paired["fingerprint"], False)]

    revoked = server.run("devices", "revoke", "laptop", "--json")
    assert revoked.returncode == 0, revoked.stderr
    assert (json.loads(revoked.stdout)["fingerprint"], json.loads(revoked.stdout)["revoked"]) == (paired["fingerprint"], True)
    again = server.run("devices", "revoke", "laptop")
    assert again.returncode == 2 and "no paired device is called laptop" in again.stderr

    from metnos.services import wiring

    with wiring.boot(Workspace.from_env(server.env()), birth=False) as runtime:
        topics = {get_topic(DevicePairingCode.CodeIssued), get_topic(PairedDevice.DevicePaired),
                  get_topic(DeviceRevocation.DeviceRevoked)}
        events = [e for _, e in runtime.log.domain_events(1, topics=tuple(topics))]
    assert [type(e).__name__ for e in events] == ["CodeIssued", "DevicePaired", "DeviceRevoked"]
    assert paired["code"] not in json.dumps([vars(e) for e in events], default=str)  # the digest only, never the code


@pytest.fixture
def runtime_at(server: Home, monkeypatch: pytest.MonkeyPatch):
    """A booted server runtime on a clock the test moves."""
    from metnos.services import wiring

    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    now = [None]

    def clock():
        from datetime import datetime, timezone

        return now[0] or datetime.now(timezone.utc)

    with wiring.boot(Workspace.from_env(server.env()), birth=False, clock=clock) as runtime:
        yield runtime, now


def _request(code: str, name: str) -> dict:
    return {"code": code, "name": name, "request_pem": new_request(name)[0].decode()}


def test_a_code_is_good_once_and_not_after_it_expires_and_a_wrong_code_pairs_nothing(runtime_at) -> None:
    from metnos.services import devices

    runtime, now = runtime_at
    code, _ = devices.offer(runtime)
    with pytest.raises(RemoteRefused) as wrong:
        devices.pair_device(runtime, _request("ABCDEFGH", "laptop"))
    assert wrong.value.kind == "pairing-code-wrong"
    devices.pair_device(runtime, _request(code, "laptop"))
    with pytest.raises(RemoteRefused) as used:
        devices.pair_device(runtime, _request(code, "nas"))
    assert used.value.kind == "pairing-code-used"

    late, late_expires = devices.offer(runtime)
    now[0] = late_expires + timedelta(seconds=1)
    with pytest.raises(RemoteRefused) as expired:
        devices.pair_device(runtime, _request(late, "nas"))
    assert expired.value.kind == "pairing-code-expired"
    assert [d["name"] for d in devices.list_devices(runtime)] == ["laptop"]


def test_a_pairing_the_server_fails_on_answers_a_structured_error(tmp_path: Path) -> None:
    from metnos.mechanisms.remote.certificates import issue, new_authority
    from metnos.mechanisms.remote.pairing import PairingListener
    from metnos.mechanisms.remote.tls import pairing_client_context, pairing_server_context, post_json

    issue(new_authority("home"), "metnos-server", server=True).write(tmp_path / "l.pem", tmp_path / "l.key")
    listener = PairingListener(pairing_server_context(tmp_path / "l.pem", tmp_path / "l.key"), lambda body: body["missing"]).start()
    try:
        with pytest.raises(RemoteRefused) as failed:
            post_json(listener.url, {"code": "ABCDEFGH"}, pairing_client_context(), 5)
    finally:
        listener.stop()
    assert failed.value.kind == "pairing-error" and "KeyError" in str(failed.value)
    assert not listener.paired.is_set() and listener.refusals == [failed.value.as_record()]
