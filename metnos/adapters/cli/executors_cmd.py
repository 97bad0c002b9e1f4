"""``metnos executors``: the catalogue, the lifecycle, and one-off runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from domain.errors import MetnosError
from metnos.settings.commands import FREE_WARNING
from metnos.settings.loader import in_force
from metnos.settings.sandbox import OFF_WARNING, sandbox_off
from metnos.settings import i18n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("executors", help="list, verify, sign and manage executors")
    inner = p.add_subparsers(dest="executors_command", required=True, metavar="SUBCOMMAND")

    ls = inner.add_parser("list", help="the catalogue: every executor, its current version and state")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)

    show = inner.add_parser("show", help="one executor: versions, states, digests, capabilities")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=run_show)

    verify = inner.add_parser("verify", help="check signatures, digests, profile locks, schemas and birth tests now")
    verify.add_argument("name", nargs="?")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=run_verify)

    sign = inner.add_parser("sign", help="write profile.lock and manifest.sig for an executor folder")
    sign.add_argument("dir", type=Path)
    sign.set_defaults(run=run_sign)

    for name, helptext in (
        ("promote", "make VERSION the current version of NAME"),
        ("quarantine", "stop NAME from being invoked"),
        ("rehabilitate", "return a quarantined or archived version to active after checking it"),
        ("archive", "move a version to .archive; it is kept, never invoked"),
    ):
        cmd = inner.add_parser(name, help=helptext)
        cmd.add_argument("name")
        cmd.add_argument("version", nargs="?", help="default: the current version")
        if name in ("quarantine", "archive"):
            cmd.add_argument("--reason", required=name == "quarantine", default="archived by the user")
        cmd.set_defaults(run=run_lifecycle, action=name)

    run = inner.add_parser("run", help="invoke one executor through the whole path (checks, sandbox, events)")
    run.add_argument("name")
    run.add_argument("args", help="the arguments as a JSON object")
    run.add_argument("--version")
    run.set_defaults(run=run_run)


def _executors():  # noqa: ANN202
    # Deferred: each of these commands boots the runtime, which `metnos --help` does not need.
    from metnos.services import executors

    return executors


def run_list(args: argparse.Namespace) -> int:
    rows = _executors().catalogue(i18n.command_language())
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    print(i18n.said("list.executors"))
    for r in rows:
        mark = "*" if r["current"] else " "
        note = r["reason"] if r["state"] not in ("active",) and r["reason"] else r["summary"]
        print(f"{r['name']:<18} {r['version'] + mark:<9} {r['origin']:<6} {r['state']:<12} {note}")
    print("(* current version)")
    return 0


def run_show(args: argparse.Namespace) -> int:
    rows, details = _executors().detail(args.name, i18n.command_language())
    if args.json:
        print(orjson.dumps({"versions": rows, "details": details}).decode())
        return 0
    for r in rows:
        print(f"{r['name']} {r['version']}{' (current)' if r['current'] else ''}  [{r['origin']}]  {r['state']} since {r['since']}")
        print(f"  {r['summary']}")
        print(f"  digest: {r['digest']}")
        if r["reason"]:
            print(f"  reason: {r['reason']}")
        d = details.get(r["version"])
        if d:
            print(f"  {d['description']}")
            prof = d["profile"]
            print(f"  side effects: {d['side_effects']}, idempotent: {d['idempotent']}")
            print(f"  fs read: {', '.join(prof['fs_read']) or '-'}   fs write: {', '.join(prof['fs_write']) or '-'}")
            print(f"  network: {', '.join(prof['network_hosts']) or 'none'}   caps: {prof['max_duration_s']} s, {prof['max_memory_mb']} MB, {prof['max_output_bytes']} B out")
            if prof["binaries"]:
                print(f"  programs: {', '.join(prof['binaries'])}")
            print(f"  profile lock: {d['profile_lock']}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    good, bad = _executors().verify(args.name)
    if args.json:
        print(orjson.dumps({
            "verified": [{"name": e.name, "version": e.version, "origin": e.origin, "digest": e.digest} for e in good],
            "quarantined": [{"name": q.name, "version": q.version, "origin": q.origin, "file": q.file, "check": q.check, "reason": q.reason} for q in bad],
        }).decode())
    else:
        for e in good:
            print(f"ok           {e.name} {e.version} ({e.origin})")
        for q in bad:
            print(f"QUARANTINED  {q.name} {q.version} ({q.origin}): {q.reason}")
    return 1 if bad else 0


def run_sign(args: argparse.Namespace) -> int:
    digest, lock = _executors().sign(args.dir)
    print(f"signed {args.dir}\n  digest:       {digest}\n  profile.lock: {lock}")
    return 0


def run_lifecycle(args: argparse.Namespace) -> int:
    version, state, current = _executors().change(args.action, args.name, args.version, reason=getattr(args, "reason", ""))
    print(f"{args.name} {version}: {state['state']}" + (" (current)" if current else ""))
    return 0


def run_run(args: argparse.Namespace) -> int:
    try:
        call_args = orjson.loads(args.args)
    except orjson.JSONDecodeError as e:
        raise MetnosError(f"the arguments are not JSON: {e}") from None
    if not isinstance(call_args, dict):
        raise MetnosError("the arguments must be a JSON object, e.g. '{\"paths\": [\"~/notes.md\"]}'")
    if sandbox_off():
        print(f"metnos: {OFF_WARNING}", file=sys.stderr)
    if in_force().settings.commands.shell == "free":
        print(f"metnos: {FREE_WARNING}", file=sys.stderr)
    call = _executors().run(args.name, call_args, caller={"kind": "cli", "command": "executors run"}, version=args.version)
    result = call.observation()
    sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    if call.outcome is not None and not call.outcome.ok:
        why = call.outcome.error.get("message") if call.outcome.kind == "SandboxUnavailable" else None
        print(f"metnos: {args.name} failed: {call.outcome.kind}" + (f": {why}" if why else ""), file=sys.stderr)
    elif call.refusal is not None:
        print(f"metnos: {call.refusal.message}", file=sys.stderr)
    return 0 if call.ok else 1
