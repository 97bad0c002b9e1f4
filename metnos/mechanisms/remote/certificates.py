"""The instance's own certificate authority and the certificates it signs.

Everything is the cryptography library's; keys are written with mode 0600 so
another user on the machine cannot borrow a device's identity.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERTIFICATE_LIFETIME = timedelta(days=365)


@dataclass(frozen=True)
class Issued:
    certificate_pem: bytes
    key_pem: bytes

    def write(self, cert_path: Path, key_path: Path) -> None:
        write_private(cert_path, self.certificate_pem)
        write_private(key_path, self.key_pem)


def write_private(path: Path, data: bytes) -> None:
    """Write a file no one but its owner can read, even for an instant."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)


def new_authority(instance_name: str, now: datetime | None = None) -> Issued:
    """A self-signed CA that may sign certificates but no further CAs."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Metnos CA {instance_name}")])
    start = now or datetime.now(timezone.utc)
    cert = (
        _builder(name, name, key.public_key(), start)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue(authority: Issued, common_name: str, *, server: bool, now: datetime | None = None) -> Issued:
    """A leaf certificate for a device (client) or for the server's listener (127.0.0.1, localhost)."""
    ca_cert = x509.load_pem_x509_certificate(authority.certificate_pem)
    ca_key = serialization.load_pem_private_key(authority.key_pem, password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        _builder(subject, ca_cert.subject, key.public_key(), now or datetime.now(timezone.utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.DNSName(common_name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def fingerprint(certificate_pem: bytes) -> str:
    """The SHA-256 of a certificate, the name a device goes by in the log."""
    return x509.load_pem_x509_certificate(certificate_pem).fingerprint(hashes.SHA256()).hex()


def _builder(subject: x509.Name, issuer: x509.Name, public_key, start: datetime) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - timedelta(minutes=5))
        .not_valid_after(start + CERTIFICATE_LIFETIME)
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def new_request(device_name: str) -> tuple[bytes, bytes]:
    """A device's key and its certificate signing request: the key never leaves the device."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, device_name)])
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    return request.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def sign_request(authority: Issued, request_pem: bytes, device_name: str, now: datetime | None = None) -> bytes:
    """The device's certificate for its request: client and listener both, named for the device.

    The name comes from the server's side of the pairing, never from the request's subject.
    """
    request = x509.load_pem_x509_csr(request_pem)
    if not request.is_signature_valid:
        raise ValueError("the certificate request's signature does not match its key")
    ca_cert = x509.load_pem_x509_certificate(authority.certificate_pem)
    ca_key = serialization.load_pem_private_key(authority.key_pem, password=None)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, device_name)])
    cert = (
        _builder(subject, ca_cert.subject, request.public_key(), now or datetime.now(timezone.utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.DNSName(device_name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)
