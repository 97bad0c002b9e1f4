"""A TLS listener on its own thread: what the call server and the pairing listener share."""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class TlsListener:
    """``path``: the route its URL names. A subclass builds its HTTP server and hands it to :meth:`_listen`."""

    path = "/"

    def _listen(self, httpd: HTTPServer, context: ssl.SSLContext) -> None:
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
        self._httpd: Any = httpd
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"https://{host}:{port}{self.path}"

    def start(self) -> Any:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class JsonHandler(BaseHTTPRequestHandler):
    """A handler that answers JSON and logs nothing to stderr: the log and the audit hold the facts."""

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass
