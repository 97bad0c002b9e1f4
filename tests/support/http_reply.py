"""Writing one JSON answer from a test server's request handler."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


def send_json_bytes(handler: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    try:
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up or stopped (a timeout test, a bot that stopped polling)
