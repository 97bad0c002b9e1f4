"""The pure rules of remote executors: pairing codes, idempotency and version drift.

Time and randomness come in as arguments so the rules replay exactly; the
certificates and the network live in metnos.mechanisms.remote.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain.errors import MetnosError

PAIRING_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud safely
PAIRING_CODE_LENGTH = 8
PAIRING_CODE_LIFETIME = timedelta(minutes=10)
# A device's name is also a host name in its certificate: letters, digits and dashes.
DEVICE_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


class RemoteRefused(MetnosError):
    """A remote step refused, with a kind a program can test and a message for people."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    def as_record(self) -> dict[str, str]:
        return {"kind": self.kind, "message": str(self)}


def pairing_code_from(entropy: bytes) -> str:
    """A code a person can type, drawn from caller-supplied random bytes."""
    if len(entropy) < PAIRING_CODE_LENGTH:
        raise ValueError(f"pairing code needs {PAIRING_CODE_LENGTH} random bytes, got {len(entropy)}")
    return "".join(PAIRING_CODE_ALPHABET[b % len(PAIRING_CODE_ALPHABET)] for b in entropy[:PAIRING_CODE_LENGTH])


def code_sha256(code: str) -> str:
    """The digest a pairing code is kept as: typed in any case, with or without spaces around."""
    return _sha256(code.strip().upper())


def check_device_name(name: str) -> str:
    if not DEVICE_NAME.match(name):
        raise RemoteRefused(
            "device-name-invalid",
            f"device name {name!r} is not a host name; use lower-case letters, digits and dashes (e.g. laptop-1)",
        )
    return name


def pairing_proof(code: str, payload: dict[str, Any]) -> str:
    """An HMAC of the pairing answer under the code: only who holds the code can make it.

    The device has no CA to trust before pairing; this proof is what tells it
    the answer (and so the CA it will pin) comes from the server that printed the code.
    """
    message = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(code.strip().upper().encode(), message, hashlib.sha256).hexdigest()


def check_pairing_proof(code: str, payload: dict[str, Any], proof: str) -> None:
    if not hmac.compare_digest(pairing_proof(code, payload), proof):
        raise RemoteRefused(
            "pairing-proof-wrong",
            "the pairing answer is not signed with this code (a wrong code, or someone in between); "
            "check the server address and run `metnos pair` there again",
        )


@dataclass(frozen=True)
class PairingOffer:
    """A one-time code issued by `metnos pair`; only its hash is kept."""

    code_sha256: str
    issued_at: datetime
    used: bool = False

    @classmethod
    def issue(cls, code: str, issued_at: datetime) -> PairingOffer:
        return cls(code_sha256=code_sha256(code), issued_at=issued_at)

    def redeem(self, code: str, now: datetime) -> PairingOffer:
        """The offer marked used, or a refusal naming why and what to do."""
        if not hmac.compare_digest(self.code_sha256, code_sha256(code)):
            raise RemoteRefused("pairing-code-wrong", "pairing code does not match; run `metnos pair` on the server for a new one")
        if self.used:
            raise RemoteRefused("pairing-code-used", "pairing code was already used; run `metnos pair` on the server for a new one")
        if now - self.issued_at > PAIRING_CODE_LIFETIME:
            raise RemoteRefused("pairing-code-expired", "pairing code expired; run `metnos pair` on the server for a new one")
        return PairingOffer(self.code_sha256, self.issued_at, used=True)


def arguments_digest(arguments: dict[str, Any]) -> str:
    """The same arguments give the same digest whatever their key order."""
    return _sha256(json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str))


@dataclass(frozen=True)
class IdempotencyRecord:
    """The recorded outcome of one call id: a repeat returns it, a changed call is refused."""

    idempotency_id: str
    arguments_sha256: str
    outcome: dict[str, Any]

    def replay_for(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if arguments_digest(arguments) != self.arguments_sha256:
            raise RemoteRefused(
                "idempotency-conflict",
                f"idempotency id {self.idempotency_id} was already used with other arguments; "
                "send a new idempotency id for a new call",
            )
        return self.outcome


def check_drift(executor: str, server_digest: str, device_digest: str | None) -> None:
    """Refuse a call when the device holds no copy, or another version, of the executor."""
    if device_digest is None:
        raise RemoteRefused("executor-missing", f"device has no copy of {executor}; the server must push it first")
    if device_digest != server_digest:
        raise RemoteRefused(
            "version-drift",
            f"device runs {executor} {device_digest[:12]}, server signed {server_digest[:12]}; push the executor again",
        )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
