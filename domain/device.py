"""The devices paired with this instance, as facts in the log.

A device is paired with a one-time code issued by `metnos pair`; the log keeps
the code's SHA-256 and its expiry, never the code, and the device's name and
certificate fingerprint, never its key. A revocation is its own fact: the
device's certificate is refused from then on.
"""

from __future__ import annotations

from typing import Any

from domain.base import Created, MetnosAggregate


class DevicePairingCode(MetnosAggregate):
    """A code `metnos pair` printed; good once, until it expires."""

    class CodeIssued(Created):
        code_sha256: str
        expires_at: str  # ISO 8601, UTC

    def __init__(self, code_sha256: str, expires_at: str) -> None:
        self.code_sha256 = code_sha256
        self.expires_at = expires_at

    @classmethod
    def issued(cls, *, id: Any, at: Any, **fields: Any) -> DevicePairingCode:  # noqa: A002
        return cls._create(cls.CodeIssued, id=id, timestamp=at, **fields)


class PairedDevice(MetnosAggregate):
    """A device whose certificate the instance CA signed for a pairing code."""

    class DevicePaired(Created):
        name: str
        fingerprint: str  # SHA-256 of the device's certificate
        code_sha256: str
        certificate_pem: str  # public: the server pins it when it calls the device

    def __init__(self, name: str, fingerprint: str, code_sha256: str, certificate_pem: str) -> None:
        self.name = name
        self.fingerprint = fingerprint
        self.code_sha256 = code_sha256
        self.certificate_pem = certificate_pem

    @classmethod
    def paired(cls, *, id: Any, at: Any, **fields: Any) -> PairedDevice:  # noqa: A002
        return cls._create(cls.DevicePaired, id=id, timestamp=at, **fields)


class DeviceRevocation(MetnosAggregate):
    """`metnos devices revoke`: the device's certificate is refused from then on."""

    class DeviceRevoked(Created):
        name: str
        fingerprint: str

    def __init__(self, name: str, fingerprint: str) -> None:
        self.name = name
        self.fingerprint = fingerprint

    @classmethod
    def revoked(cls, *, id: Any, at: Any, **fields: Any) -> DeviceRevocation:  # noqa: A002
        return cls._create(cls.DeviceRevoked, id=id, timestamp=at, **fields)


class RemoteCall(MetnosAggregate):
    """One call of an executor on a paired device, its facts correlated by the trace id.

    ``CallPlanned`` is the server's "before" manifest (which executor, which
    version, which arguments, to which device), written before anything is sent;
    ``CallAnswered`` holds the device's "after" record as it answered it, and is
    what a replay reads instead of calling again; ``CallRefused`` ends the step
    with a structured error; ``CallUndone`` is the device's answer to an undo.
    """

    class CallPlanned(Created):
        trace_id: str
        idempotency_id: str
        device: str
        device_fingerprint: str
        url: str
        executor: str
        digest: str
        arguments: dict
        arguments_sha256: str

    class CallAnswered(Created):
        trace_id: str
        outcome: dict

    class CallRefused(Created):
        trace_id: str
        kind: str
        message: str

    class CallUndone(Created):
        trace_id: str
        answer: dict

    def __init__(self, **fields: Any) -> None:
        for key, value in fields.items():
            setattr(self, key, value)

    @classmethod
    def fact(cls, event: type, *, id: Any, at: Any, **fields: Any) -> RemoteCall:  # noqa: A002
        return cls._create(event, id=id, timestamp=at, **fields)


class DeviceAddress(MetnosAggregate):
    """`metnos devices address NAME URL`: where a paired device's `metnos device serve` listens."""

    class DeviceAddressed(Created):
        name: str
        fingerprint: str
        url: str

    def __init__(self, name: str, fingerprint: str, url: str) -> None:
        self.name = name
        self.fingerprint = fingerprint
        self.url = url

    @classmethod
    def addressed(cls, *, id: Any, at: Any, **fields: Any) -> DeviceAddress:  # noqa: A002
        return cls._create(cls.DeviceAddressed, id=id, timestamp=at, **fields)


class ExecutorPush(MetnosAggregate):
    """A signed executor sent to a device, which verified and cached it: sent once for each version.

    ``cached`` is the device's answer ("now", or "already" when it held that version).
    """

    class ExecutorPushed(Created):
        device: str
        device_fingerprint: str
        executor: str
        digest: str
        cached: str

    def __init__(self, **fields: Any) -> None:
        for key, value in fields.items():
            setattr(self, key, value)

    @classmethod
    def pushed(cls, *, id: Any, at: Any, **fields: Any) -> ExecutorPush:  # noqa: A002
        return cls._create(cls.ExecutorPushed, id=id, timestamp=at, **fields)
