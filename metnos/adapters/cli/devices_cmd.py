"""``metnos devices list|address|push|revoke``: the paired devices, from the log (docs/remote.md)."""

from __future__ import annotations

import argparse

import orjson


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="the devices paired with `metnos pair`: list, address, push, revoke")
    devices_sub = p.add_subparsers(dest="devices_command", required=True, metavar="SUBCOMMAND")
    listing = devices_sub.add_parser("list", help="every paired device and whether it is revoked")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=run_list)
    addressing = devices_sub.add_parser("address", help="where a paired device listens: the URL `metnos device serve` printed there")
    addressing.add_argument("name")
    addressing.add_argument("url")
    addressing.add_argument("--json", action="store_true")
    addressing.set_defaults(run=run_address)
    pushing = devices_sub.add_parser("push", help="send a signed executor to a paired device again (after a version drift)")
    pushing.add_argument("name")
    pushing.add_argument("executor")
    pushing.add_argument("--json", action="store_true")
    pushing.set_defaults(run=run_push)
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
        print(f"{device['name']:<20} {state:<8} {device['paired_at']}  {device['fingerprint'][:16]}…  {device['url'] or '(no address)'}")
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
        told = device["device_told"]
        print("The device was told, and refuses this server's calls from now on." if told["told"]
              else f"The device was not told ({told['why']}); this server will not call it.")
    return 0


def run_address(args: argparse.Namespace) -> int:
    # Deferred: booting the runtime is not for `metnos --help`.
    from metnos.services import devices, wiring

    with wiring.boot(birth=False) as runtime:
        device = _shown(devices.set_address(runtime, args.name, args.url))
    if args.json:
        print(orjson.dumps(device).decode())
    else:
        print(f"{device['name']} listens at {device['url']}; executors that name it run there.")
    return 0


def run_push(args: argparse.Namespace) -> int:
    # Deferred: booting the runtime is not for `metnos --help`.
    from metnos.services import remote_calls, wiring

    with wiring.boot(birth=False) as runtime:
        answer = remote_calls.push_to(runtime, args.name, args.executor)
    if args.json:
        print(orjson.dumps(answer).decode())
    else:
        print(f"{answer['name']} ({answer['digest'][:19]}) is cached on {args.name} ({answer['cached']}).")
    return 0


def _shown(device: dict) -> dict:
    """A device as listed: its certificate goes by its fingerprint."""
    return {k: v for k, v in device.items() if k != "certificate_pem"}
