"""A real HTTP server on 127.0.0.1 for network tests: it serves a few paths,
can redirect elsewhere, and remembers every request it received (so a test
can assert that a refused host saw nothing)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class WebServer:
    host: str
    port: int
    redirects: dict[str, str] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)

    # Set by web_server: serve over TLS from now on.
    wrap: Callable[[ssl.SSLContext], None] = lambda context: None

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pattern(self) -> str:
        """This server as an allow-list entry."""
        return f"{self.host}:{self.port}"


@contextmanager
def web_server(host: str = "127.0.0.1") -> Iterator[WebServer]:
    state = WebServer(host, 0)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            state.seen.append(self.path)
            if self.path in state.redirects:
                self.send_response(302)
                self.send_header("Location", state.redirects[self.path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = f"page {self.path} from {state.pattern}".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host, 0), Handler)
    state.port = server.server_address[1]

    def wrap(context: ssl.SSLContext) -> None:
        server.socket = context.wrap_socket(server.socket, server_side=True)

    state.wrap = wrap
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
