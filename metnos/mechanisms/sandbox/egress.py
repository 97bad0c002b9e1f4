"""The egress proxy: the one way out of the sandbox for an executor with a network grant.

Such an executor runs in its own network namespace (bwrap ``--unshare-net``):
nothing but a loopback of its own, no route anywhere. What it gets instead is
one end of a unix socket pair, inherited by the sandbox's host program
(metnos/mechanisms/invocation/host.py). Seccomp refuses ``socket(AF_UNIX)`` to
executors, so the connections to this proxy are not dialled from inside:
for each TCP connection the host's in-sandbox bridge accepts on its loopback,
it writes one byte on the inherited socket, and this side answers with a
fresh connected socket passed as SCM_RIGHTS. The bridge is only transport; a
hostile executor that talks to the inherited socket itself gets nothing more
than a proxy connection.

Each connection is one HTTP request, in one of the two forms an HTTP client
sends to a proxy (as Anthropic's sandbox-runtime does):

* ``CONNECT host:port``: a tunnel, for https (TLS runs end to end);
* ``GET http://host:port/path`` (any method, absolute URI): plain HTTP,
  forwarded with ``Connection: close``.

The host and port are admitted only if ``admit(host, port)`` says so: the
manifest's hosts met by the instance's ``[network] allow``. A redirect is a
new request, so it is checked the same way. A refusal is an HTTP 403 to the
executor and a denied record here; every connection is recorded (host, port,
allowed or denied, and why), and the runner turns any denial into a
``NetworkDenied`` outcome.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from metnos.mechanisms.sandbox.bridge import splice

_HEAD_MAX = 64 * 1024
_CHUNK = 65536
# A hostile executor could open connections without end; past this many,
# every new one is refused (and recorded).
MAX_CONNECTIONS = 256
_HOP_HEADERS = frozenset({b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive", b"host"})

Admit = Callable[[str, int], "tuple[bool, str]"]


@dataclass(frozen=True)
class Connection:
    host: str
    port: int
    method: str
    allowed: bool
    reason: str = ""

    def to_record(self) -> dict[str, object]:
        return asdict(self)


class _BadRequest(Exception):
    pass


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    host, port = text, default_port
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise _BadRequest(f"bad authority {text!r}")
        host, rest = text[1:end], text[end + 1:]
        if rest.startswith(":"):
            port = int(rest[1:]) if rest[1:].isdigit() else -1
    elif text.count(":") == 1:
        host, _, p = text.partition(":")
        port = int(p) if p.isdigit() else -1
    host = host.strip().lower().rstrip(".")
    if not host or port is None or not 0 < port < 65536 or any(c in host for c in "/\\@ \t"):
        raise _BadRequest(f"bad authority {text!r}")
    return host, port


def parse_head(head: bytes) -> tuple[str, str, int, bytes]:
    """(method, host, port, the request head to send upstream; empty for CONNECT)."""
    lines = head.split(b"\r\n")
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise _BadRequest("malformed request line") from None
    if method == "CONNECT":
        host, port = _authority(target, None)
        return method, host, port, b""
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.netloc:
        # An https:// URI cannot be forwarded without TLS here: clients tunnel it.
        raise _BadRequest(f"a proxy request needs an absolute http:// URI or CONNECT, got {target[:100]!r}")
    host, port = _authority(parts.netloc.rpartition("@")[2], 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    out = [f"{method} {path} {version}".encode("ascii"), b"Host: " + parts.netloc.rpartition("@")[2].encode("ascii")]
    for line in lines[1:]:
        if not line:
            continue
        name = line.split(b":", 1)[0].strip().lower()
        if name not in _HOP_HEADERS:
            out.append(line)
    out.append(b"Connection: close")
    return method, host, port, b"\r\n".join(out) + b"\r\n\r\n"


def _reply(sock: socket.socket, status: str, text: str) -> None:
    body = (text + "\n").encode("utf-8", "replace")
    head = (f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nX-Metnos-Network: {status.split()[0]}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("ascii")
    try:
        sock.sendall(head + body)
    except OSError:
        pass


class EgressProxy:
    """One invocation's proxy: start it, pass ``child_fd`` to the sandbox, close it after."""

    def __init__(self, admit: Admit, *, connect_timeout_s: float = 10.0) -> None:
        self._admit = admit
        self._timeout = connect_timeout_s
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._lock = threading.Lock()
        self._records: list[Connection] = []
        self._accepted = 0
        self._closed = threading.Event()
        self._open: set[socket.socket] = set()

    def take_child_fd(self) -> int:
        """The sandbox's end, as a bare fd the caller passes to the child and
        closes after the spawn (so the child's exit ends the control stream)."""
        return self._theirs.detach()

    def start(self) -> EgressProxy:
        threading.Thread(target=self._serve, name="metnos-egress", daemon=True).start()
        return self

    @property
    def connections(self) -> list[Connection]:
        with self._lock:
            return list(self._records)

    def denied(self) -> list[Connection]:
        return [c for c in self.connections if not c.allowed]

    def close(self) -> None:
        self._closed.set()
        for s in (self._ours, self._theirs):
            try:
                s.close()
            except OSError:
                pass
        with self._lock:
            leftover, self._open = list(self._open), set()
        for s in leftover:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def __enter__(self) -> EgressProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The control stream ------------------------------------------------------
    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                wanted = self._ours.recv(64)
            except OSError:
                return
            if not wanted:
                return
            for _ in wanted:
                mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    socket.send_fds(self._ours, [b"F"], [theirs.fileno()])
                except OSError:
                    mine.close()
                    return
                finally:
                    theirs.close()
                with self._lock:
                    self._accepted += 1
                    over = self._accepted > MAX_CONNECTIONS
                    self._open.add(mine)
                threading.Thread(target=self._handle, args=(mine, over), daemon=True).start()

    def _record(self, c: Connection) -> None:
        with self._lock:
            self._records.append(c)

    # One connection ----------------------------------------------------------
    def _handle(self, client: socket.socket, over: bool) -> None:
        upstream = None
        try:
            client.settimeout(self._timeout)
            head, rest = self._read_head(client)
            try:
                method, host, port, forward = parse_head(head)
            except _BadRequest as e:
                self._record(Connection("", 0, "?", False, str(e)))
                _reply(client, "400 Bad Request", f"metnos egress proxy: {e}")
                return
            if over:
                self._record(Connection(host, port, method, False, f"more than {MAX_CONNECTIONS} connections"))
                _reply(client, "403 Forbidden", f"metnos egress proxy: more than {MAX_CONNECTIONS} connections")
                return
            ok, why = self._admit(host, port)
            if not ok:
                self._record(Connection(host, port, method, False, why))
                _reply(client, "403 Forbidden", f"metnos egress proxy: {host}:{port} is not allowed: {why}")
                return
            try:
                upstream = socket.create_connection((host, port), timeout=self._timeout)
            except OSError as e:
                self._record(Connection(host, port, method, True, f"unreachable: {e.strerror or e}"))
                _reply(client, "502 Bad Gateway", f"metnos egress proxy: cannot reach {host}:{port}: {e.strerror or e}")
                return
            self._record(Connection(host, port, method, True))
            client.settimeout(None)
            upstream.settimeout(None)
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                upstream.sendall(forward + rest)
            upstream, pair = None, (client, upstream)
            splice(*pair)  # closes both
        except (OSError, _BadRequest):
            return
        finally:
            for s in (client, upstream):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass
            with self._lock:
                self._open.discard(client)

    @staticmethod
    def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
        buf = b""
        while b"\r\n\r\n" not in buf:
            if len(buf) > _HEAD_MAX:
                raise _BadRequest("request head too large")
            data = sock.recv(_CHUNK)
            if not data:
                raise _BadRequest("connection closed before a request")
            buf += data
        head, _, rest = buf.partition(b"\r\n\r\n")
        return head, rest
