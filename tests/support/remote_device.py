"""A device listener in its own process: `python -m tests.support.remote_device DIR`.

It loads the CA, its server certificate and key from DIR, serves one idempotent
call handler that counts its runs in DIR/runs, prints its URL and waits; the
optional file DIR/revoked lists refused client fingerprints.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from metnos.mechanisms.remote.server import CallServer
from metnos.mechanisms.remote.tls import server_context


def main(folder: Path) -> None:
    def handler(call: dict) -> dict:
        runs = folder / "runs"
        runs.write_text(str(int(runs.read_text() if runs.exists() else "0") + 1))
        return {"trace_id": call["trace_id"], "echo": call.get("arguments", {})}

    server = CallServer(server_context(folder / "ca.pem", folder / "device.pem", folder / "device.key"), handler)
    revoked = folder / "revoked"
    if revoked.exists():
        server.revoked = set(revoked.read_text().split())
    server.start()
    print(server.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
