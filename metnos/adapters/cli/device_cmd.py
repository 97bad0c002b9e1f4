"""``metnos device serve``: this paired device runs the server's executors, over mutual TLS (docs/remote.md)."""

from __future__ import annotations

import argparse
import sys
import threading

import orjson

from metnos.adapters.cli.pair_cmd import _listen

DEFAULT_LISTEN = "127.0.0.1:0"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("device", help="on a paired device: serve the server's executors")
    device_sub = p.add_subparsers(dest="device_command", required=True, metavar="SUBCOMMAND")
    serve = device_sub.add_parser("serve", help="listen for the paired server's calls (mutual TLS) until stopped")
    serve.add_argument("--listen", type=_listen, default=_listen(DEFAULT_LISTEN), metavar="HOST:PORT",
                       help=f"where to listen (default {DEFAULT_LISTEN}, any free port)")
    serve.add_argument("--json", action="store_true")
    serve.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    # Deferred: the sandbox and certificate code are not for `metnos --help`.
    from metnos.services.device_host import DeviceHost
    from metnos.settings.loader import in_force

    host = DeviceHost(in_force().workspace)
    listener = host.server(*args.listen).start()
    url = listener.url.removesuffix("/call")
    host.audit("serving", url=url)
    if host.revoked_marker.is_file():
        print(f"metnos: {host.pairing['server']} revoked this device: every call is refused; "
              "pair it again with `metnos pair CODE --server URL`", file=sys.stderr, flush=True)
    if args.json:
        print(orjson.dumps({"url": url, "name": host.pairing["name"]}).decode(), flush=True)
    else:
        print(f"{host.pairing['name']} serves {host.pairing['server']}'s executors at {url}; Ctrl-C stops it.", flush=True)
    try:
        threading.Event().wait()  # SIGINT/SIGTERM end it: the interrupt gate raises here
    finally:
        listener.stop()
    return 0
