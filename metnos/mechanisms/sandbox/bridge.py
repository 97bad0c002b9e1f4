"""The in-sandbox end of the egress proxy (metnos/mechanisms/sandbox/egress.py).

Stdlib only: host.py imports it inside the sandbox (bound as
``/run/metnos/bridge.py``) before the executor is loaded and before Landlock
is applied. It listens on the sandbox's own loopback; for each connection it
asks the proxy for a connected socket over the inherited control socket (one
byte out, one fd back as SCM_RIGHTS) and copies bytes both ways. It opens no
unix socket itself, which seccomp would refuse.
"""

import selectors
import socket
import threading

_CHUNK = 65536
_STACK = 256 * 1024


def splice(a, b):
    """Copy both ways until both sides have finished, then close both."""
    sel = selectors.DefaultSelector()
    peer = {a: b, b: a}
    for s in (a, b):
        sel.register(s, selectors.EVENT_READ)
    open_ = 2
    try:
        while open_:
            for key, _ in sel.select():
                src = key.fileobj
                try:
                    data = src.recv(_CHUNK)
                except OSError:
                    data = b""
                if data:
                    try:
                        peer[src].sendall(data)
                        continue
                    except OSError:
                        return
                sel.unregister(src)
                open_ -= 1
                try:
                    peer[src].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
    finally:
        sel.close()
        for s in (a, b):
            try:
                s.close()
            except OSError:
                pass


def start(control_fd):
    """Listen on 127.0.0.1 inside the sandbox; returns the port."""
    control = socket.socket(fileno=control_fd)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    lock = threading.Lock()
    # The memory cap is on the process's address space too: threads with the
    # default 8 MB stacks would take a small executor's whole allowance.
    threading.stack_size(_STACK)

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                with lock:
                    control.sendall(b"N")
                    _, fds, _, _ = socket.recv_fds(control, 16, 1)
            except OSError:
                fds = []
            if not fds:
                conn.close()
                continue
            upstream = socket.socket(fileno=fds[0])
            threading.Thread(target=splice, args=(conn, upstream), daemon=True).start()

    threading.Thread(target=serve, name="metnos-bridge", daemon=True).start()
    return listener.getsockname()[1]
