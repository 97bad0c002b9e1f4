"""``metnos executors``: the catalogue, the lifecycle, and one-off runs."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import orjson

from domain.errors import MetnosError
from metnos.services.queries import catalogue_rows
from metnos.settings.loader import in_force


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


def _boot(birth: bool = True, *, reuse_births: bool = True):  # noqa: ANN202
    from metnos.runtime.booted import Runtime

    return Runtime.boot(in_force().workspace, birth=birth, reuse_births=reuse_births)


def run_list(args: argparse.Namespace) -> int:
    with _boot() as rt:
        rows = catalogue_rows(rt.catalogue_state())
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    print(f"{'NAME':<18} {'VERSION':<9} {'ORIGIN':<6} {'STATE':<12} SUMMARY / REASON")
    for r in rows:
        mark = "*" if r["current"] else " "
        note = r["reason"] if r["state"] not in ("active",) and r["reason"] else r["summary"]
        print(f"{r['name']:<18} {r['version'] + mark:<9} {r['origin']:<6} {r['state']:<12} {note}")
    print("(* current version)")
    return 0


def run_show(args: argparse.Namespace) -> int:
    with _boot() as rt:
        rows = [r for r in catalogue_rows(rt.catalogue_state()) if r["name"] == args.name]
        if not rows:
            msg = f"there is no executor named {args.name!r}; see `metnos executors list`"
            raise MetnosError(msg)
        loaded = [e for e in rt.report.loaded if e.name == args.name]
        details = {
            e.version: {
                "dir": str(e.dir),
                "profile": e.profile.model_dump(mode="json"),
                "profile_lock": e.profile.lock_digest(),
                "side_effects": e.manifest.contract.side_effects,
                "idempotent": e.manifest.contract.idempotent,
                "affinity": list(e.manifest.executor.affinity),
            }
            for e in loaded
        }
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
            prof = d["profile"]
            print(f"  side effects: {d['side_effects']}, idempotent: {d['idempotent']}")
            print(f"  fs read: {', '.join(prof['fs_read']) or '-'}   fs write: {', '.join(prof['fs_write']) or '-'}")
            print(f"  network: {', '.join(prof['network_hosts']) or 'none'}   caps: {prof['max_duration_s']} s, {prof['max_memory_mb']} MB, {prof['max_output_bytes']} B out")
            print(f"  profile lock: {d['profile_lock']}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    # "Now" means now: no birth result from an earlier boot is taken.
    with _boot(reuse_births=False) as rt:
        report = rt.report
        bad = [q for q in report.quarantined if not args.name or q.name == args.name]
        good = [e for e in report.loaded if not args.name or e.name == args.name]
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
    from metnos.mechanisms.executors.keys import KeyFileError, load_signing_key
    from metnos.mechanisms.executors.signing import SigningError, sign_executor

    ws = in_force().workspace
    try:
        key = load_signing_key(ws)
    except KeyFileError as e:
        raise MetnosError(f"{e}; run `metnos init` first") from None
    try:
        digest = sign_executor(args.dir, key)
    except SigningError as e:
        raise MetnosError(str(e)) from None
    lock = (args.dir / "profile.lock").read_text().strip()
    print(f"signed {args.dir}\n  digest:       {digest}\n  profile.lock: {lock}")
    return 0


def run_lifecycle(args: argparse.Namespace) -> int:
    from domain.executor import Executor, LifecycleError, executor_id
    from metnos.mechanisms.executors.signing import verify_executor

    with _boot() as rt:
        state = rt.catalogue_state()
        entries = [e for e in state["executors"].values() if e["name"] == args.name]
        if not entries:
            raise MetnosError(f"there is no executor named {args.name!r}; see `metnos executors list`")
        # A seed's name is never shadowed, so the seed entry is the one meant.
        order = {"seed": 0, "synt": 1, "skill": 2}
        entry = sorted(entries, key=lambda e: order.get(e["origin"], 3))[0]
        version = args.version or entry["current"]
        if version is None or version not in entry["versions"]:
            raise MetnosError(f"{args.name} has no version {version!r}; versions: {', '.join(sorted(entry['versions']))}")
        executor: Executor = rt.log.repository.get(executor_id(entry["origin"], entry["name"]))
        at = rt.clock()
        name_dir = rt.workspace.executors_origin_dir(entry["origin"]) / entry["name"]
        try:
            if args.action == "promote":
                executor.promote(version=version, by="user", at=at)
                _write_current(name_dir, version)
            elif args.action == "quarantine":
                executor.quarantine(version=version, check="manual", file=None, reason=args.reason, at=at)
            elif args.action == "rehabilitate":
                vdir = name_dir / version
                if not vdir.exists():
                    archived = rt.workspace.executors_origin_dir(entry["origin"]) / ".archive" / entry["name"] / version
                    if archived.exists():
                        vdir.parent.mkdir(parents=True, exist_ok=True)
                        shutil.move(str(archived), str(vdir))
                check = verify_executor(vdir, rt.verify_key)
                if not check.ok:
                    bad = check.failure
                    raise MetnosError(f"{args.name} {version} still fails {bad.file}: {bad.check}: {bad.detail}; fix and re-sign it first")
                executor.rehabilitate(version=version, digest=check.digest, by="user", at=at)
            elif args.action == "archive":
                executor.archive(version=version, reason=args.reason, by="user", at=at)
                vdir = name_dir / version
                if vdir.exists():
                    target = rt.workspace.executors_origin_dir(entry["origin"]) / ".archive" / entry["name"] / version
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(vdir), str(target))
        except LifecycleError as e:
            raise MetnosError(str(e)) from None
        rt.log.save(executor)
        rt.refresh()
        now = rt.catalogue_state()["executors"][f"{entry['origin']}/{entry['name']}"]
        print(f"{args.name} {version}: {now['versions'][version]['state']}" + (" (current)" if now["current"] == version else ""))
    return 0


def _write_current(name_dir: Path, version: str) -> None:
    tmp = name_dir / ".CURRENT.tmp"
    tmp.write_text(version + "\n")
    os.replace(tmp, name_dir / "CURRENT")


def run_run(args: argparse.Namespace) -> int:
    try:
        call_args = orjson.loads(args.args)
    except orjson.JSONDecodeError as e:
        raise MetnosError(f"the arguments are not JSON: {e}") from None
    if not isinstance(call_args, dict):
        raise MetnosError("the arguments must be a JSON object, e.g. '{\"paths\": [\"~/notes.md\"]}'")
    from metnos.mechanisms.sandbox.bwrap import sandbox_off
    from metnos.settings.sandbox import OFF_WARNING

    if sandbox_off():
        print(f"metnos: {OFF_WARNING}", file=sys.stderr)
    with _boot() as rt:
        call = rt.call(args.name, call_args, caller={"kind": "cli", "command": "executors run"}, version=args.version)
    result = call.observation()
    sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    if call.outcome is not None and not call.outcome.ok:
        why = call.outcome.error.get("message") if call.outcome.kind == "SandboxUnavailable" else None
        print(f"metnos: {args.name} failed: {call.outcome.kind}" + (f": {why}" if why else ""), file=sys.stderr)
    elif call.refusal is not None:
        print(f"metnos: {call.refusal.message}", file=sys.stderr)
    return 0 if call.ok else 1
