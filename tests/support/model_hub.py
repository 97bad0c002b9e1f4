"""A Hugging Face-like file host on 127.0.0.1 for the model download tests: a real HTTP server.

It serves ``/{repo}/resolve/{revision}/{file}`` as Hugging Face does, with ``Range`` (206 and
``Content-Range``, ``If-Range`` on the ETag) that a test can switch off (then it sends the whole
file, 200, as a server that ignores ranges does); it can close the connection after N bytes of a
reply (``cut_after``, for the next ``cuts`` replies), ask for a token, and redirect the download
to a second host (as Hugging Face redirects to its CDN). It records every request's path and headers.
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


@dataclass
class ModelHub:
    files: dict[str, bytes] = field(default_factory=dict)  # "/{repo}/resolve/{revision}/{file}" -> bytes
    honour_range: bool = True
    cut_after: int | None = None  # close the connection after this many bytes of a body ...
    cuts: int = 0                  # ... for this many replies
    token: str | None = None       # when set, a request without "Bearer <token>" gets 401
    redirect_to: str | None = None  # a base URL the resolve address redirects to (the "CDN")
    seen: list[Seen] = field(default_factory=list)
    base: str = ""

    def add(self, repo: str, file: str, data: bytes, revision: str = "main") -> str:
        self.files[f"/{repo}/resolve/{revision}/{file}"] = data
        return hashlib.sha256(data).hexdigest()


_RANGE = re.compile(r"^bytes=(\d+)-$")


@contextmanager
def model_hub() -> Iterator[ModelHub]:
    hub = ModelHub()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            hub.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
            if hub.token is not None and self.headers.get("Authorization") != f"Bearer {hub.token}":
                return self._plain(401, b"Invalid credentials")
            if hub.redirect_to is not None:
                self.send_response(302)
                self.send_header("Location", hub.redirect_to + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = hub.files.get(self.path)
            if data is None:
                return self._plain(404, b"Entry not found")
            etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
            start = 0
            wanted = _RANGE.match(self.headers.get("Range", ""))
            if_range = self.headers.get("If-Range")
            if hub.honour_range and wanted and (if_range is None or if_range == etag):
                start = int(wanted.group(1))
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", etag)
            self.end_headers()
            if hub.cut_after is not None and hub.cuts > 0:
                hub.cuts -= 1
                self.wfile.write(body[: hub.cut_after])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)  # the connection drops mid-body
                self.close_connection = True
                return
            self.wfile.write(body)

        def _plain(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a client that hangs up on a cut reply is the point of the test, not news

    server = Server(("127.0.0.1", 0), Handler)
    hub.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
