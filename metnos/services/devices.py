"""Pairing devices with this instance, listing and revoking them (docs/remote.md).

On the server, ``offer`` records a ``DevicePairingCode.CodeIssued`` (the code's
SHA-256 and expiry) and ``pair_device`` answers the device that sends the code:
the instance CA signs the device's certificate request, the log records
``PairedDevice.DevicePaired`` (name and certificate fingerprint), and the answer
carries the CA, the certificate, the fingerprint of the server's own calling
certificate and the instance's public key, with a proof under the code. On the
device, ``join`` checks that proof before it keeps anything, and writes every
file with mode 0600. ``revoke`` records ``DeviceRevocation.DeviceRevoked``.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography import x509
from eventsourcing.utils import get_topic

from domain.device import DeviceAddress, DevicePairingCode, DeviceRevocation, PairedDevice
from domain.remote import (
    PAIRING_CODE_LIFETIME,
    PairingOffer,
    RemoteRefused,
    check_device_name,
    check_pairing_proof,
    code_sha256,
    pairing_code_from,
    pairing_proof,
)
from metnos.mechanisms.executors.keys import public_key_path
from metnos.mechanisms.remote.certificates import (
    Issued,
    fingerprint,
    issue,
    new_authority,
    new_request,
    sign_request,
    write_private,
)
from metnos.mechanisms.remote.pairing import PairingListener
from metnos.mechanisms.remote.tls import pairing_client_context, pairing_server_context, pinned_client_context, post_json
from metnos.settings.workspace import Workspace

PAIRING_TIMEOUT_S = 10.0
_pairing_lock = threading.Lock()  # one redemption at a time: a code is good once


@dataclass(frozen=True)
class ServerFiles:
    """The instance CA, the pairing listener's certificate and the certificate the server calls devices with."""

    root: Path

    ca_pem = property(lambda self: self.root / "ca.pem")
    ca_key = property(lambda self: self.root / "ca.key")
    listener_pem = property(lambda self: self.root / "listener.pem")
    listener_key = property(lambda self: self.root / "listener.key")
    caller_pem = property(lambda self: self.root / "caller.pem")
    caller_key = property(lambda self: self.root / "caller.key")


@dataclass(frozen=True)
class DeviceFiles:
    """What a paired device keeps: the CA it pins, its certificate and key, the instance's public key."""

    root: Path

    ca_pem = property(lambda self: self.root / "ca.pem")
    device_pem = property(lambda self: self.root / "device.pem")
    device_key = property(lambda self: self.root / "device.key")
    instance_pub = property(lambda self: self.root / "instance.pub")
    pairing = property(lambda self: self.root / "pairing.json")
    # Written when the server said it revoked this device; a new pairing removes it.
    revoked = property(lambda self: self.root / "revoked.json")

    @property
    def paired(self) -> bool:
        return self.pairing.is_file()


def server_files(workspace: Workspace) -> ServerFiles:
    return ServerFiles(workspace.keys_dir / "remote")


def device_files(workspace: Workspace) -> DeviceFiles:
    return DeviceFiles(workspace.keys_dir / "device")


def ensure_authority(workspace: Workspace, instance_name: str = "home") -> ServerFiles:
    """The instance CA and the server's two certificates, made once and kept with mode 0600."""
    files = server_files(workspace)
    if not files.ca_pem.is_file():
        new_authority(instance_name).write(files.ca_pem, files.ca_key)
    authority = Issued(files.ca_pem.read_bytes(), files.ca_key.read_bytes())
    if not files.listener_pem.is_file():
        issue(authority, "metnos-server", server=True).write(files.listener_pem, files.listener_key)
    if not files.caller_pem.is_file():
        issue(authority, "metnos-server-caller", server=False).write(files.caller_pem, files.caller_key)
    return files


def offer(rt: Any) -> tuple[str, datetime]:
    """A new one-time pairing code and when it expires; the log keeps its digest only."""
    code = pairing_code_from(secrets.token_bytes(16))
    now = rt.clock()
    expires = now + PAIRING_CODE_LIFETIME
    rt.log.save(DevicePairingCode.issued(id=rt.ids(), at=now, code_sha256=code_sha256(code), expires_at=expires.isoformat()))
    return code, expires


def pair_device(rt: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Answer a device's pairing request, or refuse it naming why (wrong, used or expired code, taken name)."""
    code = str(body.get("code", ""))
    name = check_device_name(str(body.get("name", "")))
    request_pem = str(body.get("request_pem", "")).encode()
    files = ensure_authority(rt.workspace)
    with _pairing_lock:
        pairing_offer = _offer_on_record(rt, code)
        pairing_offer.redeem(code, rt.clock())
        if name in {d["name"] for d in list_devices(rt) if not d["revoked"]}:
            raise RemoteRefused("device-name-taken", f"a device named {name} is already paired; choose another --name or revoke it first")
        authority = Issued(files.ca_pem.read_bytes(), files.ca_key.read_bytes())
        try:
            certificate_pem = sign_request(authority, request_pem, name)
        except ValueError as error:
            raise RemoteRefused("pairing-malformed", f"the certificate request is not valid ({error}); run `metnos pair CODE --server URL` again") from None
        rt.log.save(PairedDevice.paired(id=rt.ids(), at=rt.clock(), name=name, fingerprint=fingerprint(certificate_pem),
                                        code_sha256=pairing_offer.code_sha256, certificate_pem=certificate_pem.decode()))
    payload = {
        "name": name,
        "ca_pem": files.ca_pem.read_text(),
        "certificate_pem": certificate_pem.decode(),
        "caller_fingerprint": fingerprint(files.caller_pem.read_bytes()),
        "instance_public_key": public_key_path(rt.workspace).read_text().strip(),
    }
    return {**payload, "proof": pairing_proof(code, payload)}


def _offer_on_record(rt: Any, code: str) -> PairingOffer:
    digest = code_sha256(code)
    issued: PairingOffer | None = None
    used = False
    topics = (get_topic(DevicePairingCode.CodeIssued), get_topic(PairedDevice.DevicePaired))
    for _, event in rt.log.domain_events(1, topics=topics):
        if event.code_sha256 != digest:
            continue
        if isinstance(event, DevicePairingCode.CodeIssued):
            issued = PairingOffer(digest, datetime.fromisoformat(event.expires_at) - PAIRING_CODE_LIFETIME)
        else:
            used = True
    if issued is None:
        raise RemoteRefused("pairing-code-wrong", "pairing code does not match; run `metnos pair` on the server for a new one")
    return PairingOffer(issued.code_sha256, issued.issued_at, used=used)


def list_devices(rt: Any) -> list[dict[str, Any]]:
    """Every device ever paired, oldest first, with whether it is revoked and where it was last said to listen."""
    topics = (get_topic(PairedDevice.DevicePaired), get_topic(DeviceRevocation.DeviceRevoked), get_topic(DeviceAddress.DeviceAddressed))
    devices: dict[str, dict[str, Any]] = {}
    for _, event in rt.log.domain_events(1, topics=topics):
        if isinstance(event, PairedDevice.DevicePaired):
            devices[event.fingerprint] = {"name": event.name, "fingerprint": event.fingerprint,
                                          "paired_at": event.timestamp.isoformat(timespec="seconds"), "revoked": False,
                                          "certificate_pem": event.certificate_pem, "url": None}
        elif event.fingerprint not in devices:
            continue
        elif isinstance(event, DeviceAddress.DeviceAddressed):
            devices[event.fingerprint]["url"] = event.url
        else:
            devices[event.fingerprint]["revoked"] = True
    return list(devices.values())


def set_address(rt: Any, name: str, url: str) -> dict[str, Any]:
    """Record where the paired device ``name`` listens (the URL `metnos device serve` printed there)."""
    live = [d for d in list_devices(rt) if d["name"] == name and not d["revoked"]]
    if not live:
        raise RemoteRefused("device-unknown", f"no paired device is called {name}; `metnos devices list` shows them")
    url = url.strip().rstrip("/")
    if not url.startswith("https://") or len(url) <= len("https://"):
        raise RemoteRefused("device-address-invalid", f"{url!r} is not an https:// address; give the URL `metnos device serve` printed on {name}")
    rt.log.save(DeviceAddress.addressed(id=rt.ids(), at=rt.clock(), name=name, fingerprint=live[-1]["fingerprint"], url=url))
    return {**live[-1], "url": url}


def revoked_fingerprints(rt: Any) -> set[str]:
    return {d["fingerprint"] for d in list_devices(rt) if d["revoked"]}


def revoke(rt: Any, name: str, *, timeout: float = PAIRING_TIMEOUT_S) -> dict[str, Any]:
    """Revoke the paired device called ``name``; its certificate is refused from then on.

    The revocation is in the log first; then, where the device's address is known, the device is
    told (``POST /revoked``), so that it refuses this server's calls too. ``told`` says whether it
    heard; a device that was offline still stands revoked here, and is told nothing more."""
    live = [d for d in list_devices(rt) if d["name"] == name and not d["revoked"]]
    if not live:
        raise RemoteRefused("device-unknown", f"no paired device is called {name}; `metnos devices list` shows them")
    device = live[-1]
    rt.log.save(DeviceRevocation.revoked(id=rt.ids(), at=rt.clock(), name=name, fingerprint=device["fingerprint"]))
    told: dict[str, Any] = {"told": False, "why": "its address is not known (`metnos devices address`)"}
    if device["url"]:
        files = ensure_authority(rt.workspace)
        context = pinned_client_context(device["certificate_pem"], files.caller_pem, files.caller_key)
        try:
            post_json(device["url"] + "/revoked", {"fingerprint": device["fingerprint"]}, context, timeout)
            told = {"told": True}
        except RemoteRefused as refusal:
            told = {"told": False, "why": str(refusal)}
    return {**device, "revoked": True, "device_told": told}


def join(workspace: Workspace, code: str, server_url: str, name: str, *, timeout: float = PAIRING_TIMEOUT_S) -> dict[str, Any]:
    """On the device: send the code and a certificate request, check the answer's proof, keep it (0600)."""
    check_device_name(name)
    url = server_url.rstrip("/")
    url = url if url.endswith("/pair") else url + "/pair"
    request_pem, key_pem = new_request(name)
    try:
        answer = post_json(url, {"code": code, "name": name, "request_pem": request_pem.decode()}, pairing_client_context(), timeout)
    except RemoteRefused as refusal:
        if refusal.kind not in ("offline", "timeout"):
            raise
        raise RemoteRefused(refusal.kind, f"{url} did not answer ({refusal.kind}); `metnos pair` must be waiting on the "
                                          "server, with its code not yet expired: run it again there") from refusal
    proof = str(answer.pop("proof", ""))
    check_pairing_proof(code, answer, proof)
    certificate = x509.load_pem_x509_certificate(answer["certificate_pem"].encode())
    ca = x509.load_pem_x509_certificate(answer["ca_pem"].encode())
    ours = x509.load_pem_x509_csr(request_pem).public_key()
    if certificate.public_key() != ours:
        raise RemoteRefused("pairing-proof-wrong", "the certificate the server sent is not for this device's key; pair again")
    certificate.verify_directly_issued_by(ca)
    files = device_files(workspace)
    write_private(files.device_key, key_pem)
    write_private(files.device_pem, answer["certificate_pem"].encode())
    write_private(files.ca_pem, answer["ca_pem"].encode())
    write_private(files.instance_pub, (answer["instance_public_key"] + "\n").encode())
    server = url.removesuffix("/pair")
    record = {"name": name, "server": server, "caller_fingerprint": answer["caller_fingerprint"],
              "fingerprint": fingerprint(answer["certificate_pem"].encode())}
    write_private(files.pairing, json.dumps(record, indent=2).encode())
    files.revoked.unlink(missing_ok=True)  # paired anew: the server's calls are welcome again
    return record


@dataclass
class PairingWindow:
    """`metnos pair` on the server: a code on record and a listener waiting for the device that sends it."""

    code: str
    expires: datetime
    server: str
    ca_fingerprint: str
    listener: PairingListener

    def wait(self, seconds: float) -> bool:
        """Whether a device paired within ``seconds``."""
        return self.listener.wait(seconds)

    @property
    def refusals(self) -> list[dict[str, str]]:
        return self.listener.refusals

    def close(self) -> None:
        self.listener.stop()


def open_pairing(rt: Any, host: str, port: int) -> PairingWindow:
    files = ensure_authority(rt.workspace)
    listener = PairingListener(pairing_server_context(files.listener_pem, files.listener_key),
                               lambda body: pair_device(rt, body), host, port).start()
    try:
        code, expires = offer(rt)
    except BaseException:
        listener.stop()
        raise
    return PairingWindow(code, expires, listener.url.removesuffix("/pair"), fingerprint(files.ca_pem.read_bytes()), listener)
