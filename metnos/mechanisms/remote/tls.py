"""Mutual TLS with the standard library: TLS 1.3 only, both sides pinned to the instance CA."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from domain.remote import RemoteRefused


def server_context(ca_path: Path, cert_path: Path, key_path: Path) -> ssl.SSLContext:
    """A listener that accepts only clients holding a certificate from the instance CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cafile=str(ca_path))
    context.load_cert_chain(str(cert_path), str(key_path))
    return context


def client_context(ca_path: Path, cert_path: Path | None, key_path: Path | None) -> ssl.SSLContext:
    """A caller that trusts the instance CA alone, never the system's store."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = True
    context.load_verify_locations(cafile=str(ca_path))
    if cert_path is not None and key_path is not None:
        context.load_cert_chain(str(cert_path), str(key_path))
    return context


def pinned_client_context(peer_certificate_pem: str, cert_path: Path, key_path: Path) -> ssl.SSLContext:
    """A caller that trusts one peer certificate alone: the device it paired, not any other the CA signed."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = True
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the pinned leaf is the anchor
    context.load_verify_locations(cadata=peer_certificate_pem)
    context.load_cert_chain(str(cert_path), str(key_path))
    return context


def pairing_server_context(cert_path: Path, key_path: Path) -> ssl.SSLContext:
    """The pairing listener: TLS 1.3, no client certificate yet (the device has none before pairing)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(str(cert_path), str(key_path))
    return context


def pairing_client_context() -> ssl.SSLContext:
    """The device before pairing trusts no CA yet: the answer carries a proof under the code instead.

    The channel is still TLS 1.3 (nothing in clear on the wire); who answers is
    checked by domain.remote.check_pairing_proof, not by a certificate.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def post_json(url: str, body: dict[str, Any], context: ssl.SSLContext, timeout: float) -> dict[str, Any]:
    """POST one JSON call; every way it can fail ends as a RemoteRefused naming cause and fix."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        detail = _refusal_in(error)
        raise RemoteRefused(detail.get("kind", "remote-error"), detail.get("message", str(error))) from error
    except urllib.error.URLError as error:
        reason = error.reason
        if isinstance(reason, ssl.SSLCertVerificationError):
            raise RemoteRefused(
                "certificate-refused",
                f"{url} presented a certificate not signed by this instance's CA ({reason.verify_message}); "
                "check the address, or pair the device again",
            ) from error
        if isinstance(reason, ssl.SSLError):
            raise RemoteRefused(
                "certificate-refused",
                f"{url} refused the TLS handshake ({reason.reason}); the device may be revoked or unpaired: pair it again",
            ) from error
        if isinstance(reason, TimeoutError):
            raise RemoteRefused("timeout", f"{url} did not answer within {timeout}s; check the device is awake") from error
        raise RemoteRefused("offline", f"{url} is unreachable ({reason}); start `metnos device serve` on the device") from error
    except TimeoutError as error:
        raise RemoteRefused("timeout", f"{url} did not answer within {timeout}s; check the device is awake") from error
    except ssl.SSLError as error:
        raise RemoteRefused(
            "certificate-refused", f"{url} ended the TLS session ({error.reason}); the device may be revoked: pair it again"
        ) from error
    except ConnectionError as error:
        raise RemoteRefused(
            "certificate-refused", f"{url} closed the connection ({error}); the client certificate may be refused: pair again"
        ) from error


def _refusal_in(error: urllib.error.HTTPError) -> dict[str, str]:
    try:
        detail = json.loads(error.read())
    except (ValueError, OSError):
        return {}
    return detail if isinstance(detail, dict) else {}
