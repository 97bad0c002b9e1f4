"""The daemon's ASGI application (Starlette) and the uvicorn server that serves it from a thread."""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Mount

from metnos.adapters.daemon.api import http_error, routes as api_routes
from metnos.adapters.daemon.auth import TokenGate
from metnos.adapters.daemon.dashboard import login_page, routes as dashboard_routes
from metnos.adapters.daemon.size_limit import SizeLimit
from metnos.adapters.daemon.stopping import RefuseWhileStopping
from metnos.services import extensions
from metnos.services.host import DaemonHost
from metnos.services.token import load_or_create_token
from metnos.settings.config_file import load_daemon_config
from metnos.settings.daemon import DEFAULT_MAX_REQUEST_BYTES
from metnos.settings.http_address import HttpAddressError, parse_address

# Seconds an idle HTTP connection stays open (uvicorn's default is 5).
KEEP_ALIVE_S = 30


def build_app(host: DaemonHost, token: str, *, mounts: list[tuple[str, Any]] | None = None,
              max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> Any:
    mounted = [Mount(path, app=sub) for path, sub in (extensions.mounts(host) if mounts is None else mounts)]
    app = Starlette(routes=[*api_routes(host), *dashboard_routes(host, token), *mounted],
                    exception_handlers={HTTPException: http_error})
    # Outermost: a body too large is refused before the token is even looked at.
    return RefuseWhileStopping(SizeLimit(TokenGate(app, token, login_page), max_request_bytes), host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HttpServer:
    """uvicorn on its own thread; the daemon's main thread keeps the scheduler and the signals."""

    def __init__(self, app: Any, address: str) -> None:
        host, port = parse_address(address)
        # Bound here, so that a busy port is an error at start, named, and port 0 gets a free port.
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((host, port))
        except OSError as e:
            self.socket.close()
            raise HttpAddressError(f"cannot listen on {address}: {e.strerror or e}; choose another with --http HOST:PORT") from None
        self.host, self.port = host, self.socket.getsockname()[1]
        # Keep-alive past the 5 s that httpx (the CLI, Telegram, the tests) keeps an idle connection: with the same 5 s on
        # both ends, a server whose loop is slow to wake closes a connection a request is already on (a reset, not an answer).
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=3,
                                server_header=False, timeout_keep_alive=KEEP_ALIVE_S)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, name="metnos-http", daemon=True)

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    def start(self, wait_s: float = 15.0) -> None:
        self.thread.start()
        deadline = time.monotonic() + wait_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise HttpAddressError(f"the HTTP server did not start on {self.url}")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()


def start_http(host: DaemonHost, address: str) -> HttpServer:
    """The daemon's hook (metnos/services/extensions.py): the API, the dashboard and the mounts, listening on ``address``."""
    limit = load_daemon_config(host.runtime.workspace.config_file).max_request_bytes
    server = HttpServer(build_app(host, load_or_create_token(host.runtime.workspace), max_request_bytes=limit), address)
    if not is_loopback(server.host):
        print(f"metnos: the daemon listens on {server.url}, beyond this machine; only its token keeps others out", file=sys.stderr)
    server.start()
    return server
