"""The pairing listener `metnos pair` runs: one POST /pair over TLS 1.3, then it stops.

It knows nothing of codes or the log: the handler it is given decides and
refuses (metnos.services.devices); a refusal goes back as its kind and message.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from domain.remote import RemoteRefused
from metnos.mechanisms.remote.listener import JsonHandler, TlsListener

PairingHandler = Callable[[dict[str, Any]], dict[str, Any]]
MAX_REQUEST_BYTES = 64 * 1024


class PairingListener(TlsListener):
    path = "/pair"

    def __init__(self, context: ssl.SSLContext, handler: PairingHandler, host: str = "127.0.0.1", port: int = 0) -> None:
        self.handler = handler
        self.paired = threading.Event()
        self.refusals: list[dict[str, str]] = []
        self._listen(ThreadingHTTPServer((host, port), _handler_class(self)), context)

    def wait(self, timeout: float) -> bool:
        """Whether a device paired before ``timeout`` seconds passed."""
        return self.paired.wait(timeout)


def _handler_class(listener: PairingListener) -> type[BaseHTTPRequestHandler]:
    class _PairHandler(JsonHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            try:
                length = int(self.headers.get("Content-Length", "0"))
                if self.path != "/pair" or not 0 < length <= MAX_REQUEST_BYTES:
                    raise RemoteRefused("pairing-malformed", "a pairing is one POST /pair of a JSON body; use `metnos pair CODE --server URL`")
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError:
                    raise RemoteRefused("pairing-malformed", "the pairing body is not JSON; use `metnos pair CODE --server URL`") from None
                answer = listener.handler(body)
                self._send(200, answer)
                listener.paired.set()
            except RemoteRefused as refusal:
                listener.refusals.append(refusal.as_record())
                self._send(403, refusal.as_record())
            except Exception as error:  # noqa: BLE001 - the device gets a structured error, never a dropped connection
                refusal = RemoteRefused("pairing-error", f"the server failed to pair ({type(error).__name__}: {error}); "
                                        "run `metnos pair` there again")
                listener.refusals.append(refusal.as_record())
                self._send(500, refusal.as_record())

    return _PairHandler
