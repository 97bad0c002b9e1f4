"""``metnos pair``: on the server, print a one-time code and wait for the device; on the device,
``metnos pair CODE --server URL`` exchanges keys with it (docs/remote.md)."""

from __future__ import annotations

import argparse
import socket
import sys

import orjson

from metnos.adapters.cli import qr

DEFAULT_LISTEN = "127.0.0.1:0"


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not HOST:PORT (e.g. 0.0.0.0:8443, or 127.0.0.1:0 for any free port)")
    return host, int(port)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pair", help="pair a device: print a one-time code here, or send one with --server on the device")
    p.add_argument("code", nargs="?", help="on the device: the code `metnos pair` printed on the server")
    p.add_argument("--server", metavar="URL", help="on the device: the address `metnos pair` printed on the server")
    p.add_argument("--name", help="on the device: what the server calls this device (default: the host name)")
    p.add_argument("--listen", type=_listen, default=_listen(DEFAULT_LISTEN), metavar="HOST:PORT",
                   help=f"on the server: where to wait for the device (default {DEFAULT_LISTEN}, any free port)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_pair)


def run_pair(args: argparse.Namespace) -> int:
    if args.code is None:
        if args.server or args.name:
            print("metnos: --server and --name are for the device, with the code: `metnos pair CODE --server URL`", file=sys.stderr)
            return 2
        return _serve(args)
    if not args.server:
        print("metnos: a code needs the server's address: `metnos pair CODE --server URL` (the URL `metnos pair` printed)", file=sys.stderr)
        return 2
    return _join(args)


def _serve(args: argparse.Namespace) -> int:
    # Deferred: booting the runtime is not for `metnos --help`.
    from metnos.services import devices, wiring

    with wiring.boot(birth=False) as runtime:
        window = devices.open_pairing(runtime, *args.listen)
        try:
            until = window.expires.isoformat(timespec="seconds")
            if args.json:
                print(orjson.dumps({"code": window.code, "server": window.server, "expires_at": until,
                                    "ca_fingerprint": window.ca_fingerprint}).decode(), flush=True)
            else:
                print(window.code)
                print(f"On the device, before {until}: metnos pair {window.code} --server {window.server}")
                print(f"The device will pin this instance's CA, SHA-256 {window.ca_fingerprint[:16]}…; the code is good once.",
                      flush=True)
                if qr.can_show(sys.stdout):
                    # The same command, to scan on the device rather than type.
                    print(qr.rendered(f"metnos pair {window.code} --server {window.server}"), end="", flush=True)
            paired = window.wait(max(0.0, (window.expires - runtime.clock()).total_seconds()))
        finally:
            window.close()
        for refusal in window.refusals:
            print(f"metnos: a pairing was refused: {refusal['message']}", file=sys.stderr)
        if not paired:
            print(f"metnos: the code expired at {until} unused; run `metnos pair` again", file=sys.stderr)
            return 1
        device = devices.list_devices(runtime)[-1]
    if not args.json:
        print(f"Paired {device['name']} (certificate {device['fingerprint'][:16]}…); `metnos devices list` shows it.")
    return 0


def _join(args: argparse.Namespace) -> int:
    # Deferred: the certificate code is not for `metnos --help`.
    from metnos.services import devices
    from metnos.settings.loader import in_force

    name = args.name or _host_name()
    record = devices.join(in_force().workspace, args.code, args.server, name)
    if args.json:
        print(orjson.dumps(record).decode())
    else:
        print(f"Paired as {record['name']} with {record['server']}; this device's certificate and key are kept with mode 0600.")
        print("Start `metnos device serve` here so the server can run its executors on this device.")
    return 0


def _host_name() -> str:
    cleaned = "".join(c if c.isalnum() else "-" for c in socket.gethostname().split(".")[0].lower()).strip("-")
    return cleaned[:63] or "device"
