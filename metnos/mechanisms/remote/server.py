"""A mutual-TLS listener for calls: idempotent by id, refusing revoked certificates.

The peer's certificate is checked by TLS against the instance CA; revocation is
a list of fingerprints the device learns from the server, checked per call.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes

from domain.remote import IdempotencyRecord, RemoteRefused, arguments_digest
from metnos.mechanisms.remote.listener import JsonHandler, TlsListener

Handler = Callable[[dict[str, Any]], dict[str, Any]]
# A pushed executor is a folder of source files; anything larger is refused before it is read.
MAX_BODY_BYTES = 16 * 1024 * 1024


class CallServer(TlsListener):
    """Serves POST /call: {"idempotency_id", "trace_id", "arguments"} -> the handler's outcome.

    ``routes`` answers other paths (POST /executor, /undo on a device) with the same
    certificate checks but no idempotency; ``callers``, when given, are the only client
    fingerprints let in (a device admits its server's certificate alone); ``on_refused``
    hears every refusal, so the device's audit keeps it. With ``records_file`` the
    idempotency records are kept on disk, one JSON line each, so a restarted listener
    still answers a repeated id from its record instead of running the call again.
    """

    path = "/call"

    def __init__(self, context: ssl.SSLContext, handler: Handler, host: str = "127.0.0.1", port: int = 0, *,
                 routes: dict[str, Handler] | None = None, callers: set[str] | None = None,
                 on_refused: Callable[[dict[str, str]], None] | None = None, records_file: Path | None = None) -> None:
        self.handler = handler
        self.routes = dict(routes or {})
        self.callers = callers
        self.on_refused = on_refused
        self.records_file = records_file
        self.records: dict[str, IdempotencyRecord] = _load_records(records_file)
        self.revoked: set[str] = set()
        self.refusals: list[dict[str, str]] = []
        self.runs = 0
        self._lock = threading.Lock()
        httpd = _AuditedServer((host, port), _handler_class(self))
        httpd.on_refused = self._refused_handshake
        self._listen(httpd, context)

    def _refused_handshake(self, error: ssl.SSLError) -> None:
        record = RemoteRefused(
            "certificate-refused", f"a caller's TLS handshake was refused ({error.reason or error}); only the paired server may call"
        ).as_record()
        self.refusals.append(record)
        if self.on_refused is not None:
            self.on_refused({**record, "path": ""})

    def answer(self, peer_fingerprint: str, call: dict[str, Any], path: str = "/call") -> dict[str, Any]:
        if peer_fingerprint in self.revoked:
            raise RemoteRefused("device-revoked", "this client certificate was revoked; pair the device again with `metnos pair`")
        if self.callers is not None and peer_fingerprint not in self.callers:
            raise RemoteRefused(
                "caller-unknown", "this certificate is from the instance CA but is not the server's; only the paired server may call"
            )
        if path in self.routes:
            return self.routes[path](call)
        idempotency_id = call.get("idempotency_id")
        trace_id = call.get("trace_id")
        if not idempotency_id or not trace_id:
            raise RemoteRefused("call-malformed", "a remote call needs an idempotency_id and a trace_id; the caller must send both")
        arguments = call.get("arguments", {})
        with self._lock:
            record = self.records.get(idempotency_id)
            if record is not None:
                return record.replay_for(arguments)
            outcome = self.handler(call)
            self.runs += 1
            record = IdempotencyRecord(idempotency_id, arguments_digest(arguments), outcome)
            self.records[idempotency_id] = record
            if self.records_file is not None:
                self.records_file.parent.mkdir(parents=True, exist_ok=True)
                with self.records_file.open("a") as out:
                    out.write(json.dumps(asdict(record), sort_keys=True, default=str) + "\n")
            return outcome


_STATUS = {"idempotency-conflict": 409, "call-too-large": 413}


def _discard(stream: Any, length: int) -> None:
    while length > 0:
        chunk = stream.read(min(length, 1 << 16))
        if not chunk:
            return
        length -= len(chunk)


def _load_records(path: Path | None) -> dict[str, IdempotencyRecord]:
    if path is None or not path.is_file():
        return {}
    records = [IdempotencyRecord(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    return {r.idempotency_id: r for r in records}


class _AuditedServer(ThreadingHTTPServer):
    """A listener whose refused handshakes (no certificate, another CA) are told, not just dropped."""

    on_refused: Callable[[ssl.SSLError], None] | None = None

    def get_request(self):  # socketserver's hook: the TLS handshake happens in accept()
        try:
            return super().get_request()
        except ssl.SSLError as error:
            if self.on_refused is not None:
                self.on_refused(error)
            raise


def _handler_class(server: CallServer) -> type[BaseHTTPRequestHandler]:
    class _CallHandler(JsonHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            try:
                peer = self.connection.getpeercert(binary_form=True)
                if peer is None:  # only reachable if the context stopped requiring a certificate
                    raise RemoteRefused("certificate-missing", "a call needs a client certificate; pair the device with `metnos pair`")
                fingerprint = x509.load_der_x509_certificate(peer).fingerprint(hashes.SHA256()).hex()
                length = int(self.headers.get("Content-Length", "0"))
                if length > MAX_BODY_BYTES:
                    _discard(self.rfile, length)  # read, so the caller gets the reason and not a reset
                    raise RemoteRefused("call-too-large", f"a call of {length} bytes is over the {MAX_BODY_BYTES} a device reads; "
                                        "send a smaller executor or arguments")
                call = json.loads(self.rfile.read(length))
                self._send(200, server.answer(fingerprint, call, self.path))
            except RemoteRefused as refusal:
                self._refuse(refusal, _STATUS.get(refusal.kind, 403))
            except Exception as error:  # noqa: BLE001 - the caller gets a structured error, never a dropped connection
                self._refuse(RemoteRefused("device-error", f"the device failed on this call ({type(error).__name__}: {error}); "
                                           "see its audit trail"), 500)

        def _refuse(self, refusal: RemoteRefused, status: int) -> None:
            server.refusals.append(refusal.as_record())
            if server.on_refused is not None:
                server.on_refused({**refusal.as_record(), "path": self.path})
            self._send(status, refusal.as_record())

    return _CallHandler
