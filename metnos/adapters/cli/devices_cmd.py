"""``metnos devices list`` and ``metnos devices revoke NAME``: the paired devices, from the log (docs/remote.md)."""

from __future__ import annotations

import argparse

import orjson


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="the devices paired with `metnos pair`: list, revoke")
    devices_sub = p.add_subparsers(dest="devices_command", required=True, metavar="SUBCOMMAND")
    listing = devices_sub.add_parser("list", help="every paired device and whether it is revoked")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=run_list)
    revoking = devices_sub.add_parser("revoke", help="refuse a device's certificate from now on (an event in the log)")
    revoking.add_argument("name")
    revoking.add_argument("--json", action="store_true")
    revoking.set_defaults(run=run_revoke)


def run_list(args: argparse.Namespace) -> int:
    # Deferred: booting the runtime is not for `metnos --help`.
    from metnos.services import devices, wiring

    with wiring.boot(birth=False) as runtime:
        found = [_shown(d) for d in devices.list_devices(runtime)]
    if args.json:
        print(orjson.dumps(found).decode())
        return 0
    if not found:
        print("No device is paired; `metnos pair` pairs one.")
    for device in found:
        state = "revoked" if device["revoked"] else "paired"
        print(f"{device['name']:<20} {state:<8} {device['paired_at']}  {device['fingerprint'][:16]}…")
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    # Deferred: booting the runtime is not for `metnos --help`.
    from metnos.services import devices, wiring

    with wiring.boot(birth=False) as runtime:
        device = _shown(devices.revoke(runtime, args.name))
    if args.json:
        print(orjson.dumps(device).decode())
    else:
        print(f"Revoked {device['name']}: its certificate is refused from now on; pair it again with `metnos pair`.")
    return 0


def _shown(device: dict) -> dict:
    """A device as listed: its certificate goes by its fingerprint."""
    return {k: v for k, v in device.items() if k != "certificate_pem"}
