"""``metnos undo``: put back the files the last turn changed, and say what cannot be put back."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from metnos.settings.loader import in_force

_VERBS = {
    "remove": ("removed", "would remove", "it did not exist before"),
    "bring back": ("brought back", "would bring back", "as it was"),
    "restore": ("restored", "would restore", "as it was"),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("undo", help="undo the last turn not yet undone: its files go back as they were")
    p.add_argument("turn_id", nargs="?", help="a particular turn (an id prefix is enough); the last one by default")
    p.add_argument("--dry-run", action="store_true", help="show what would change, change nothing")
    p.add_argument("--force", action="store_true", help="restore even files changed since the turn")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def _short(path: str, home: str) -> str:
    return "~" + path[len(home):] if home and (path == home or path.startswith(home + "/")) else path


def _lines(result: Any, *, dry_run: bool, home: str) -> list[str]:
    plan = result.plan
    out = [f'turn {plan.turn_id} "{plan.text[:80]}"']
    for action in plan.actions:
        done, would, how = _VERBS[action.verb]
        out.append(f"  {would if dry_run else done}  {_short(action.path, home)}  ({how}; step {action.step}, {action.executor})")
    for remote in plan.remote:
        for path in remote.restored or remote.paths:
            done = "restored" if remote.restored else "would restore"
            out.append(f"  {done if not dry_run else 'would restore'}  {remote.device}:{path}  (on the device; step {remote.step}, {remote.executor})")
    if not plan.actions and not plan.remote:
        out.append("  no file to put back")
    if plan.not_undoable:
        out.append("cannot be undone:")
        for item in plan.not_undoable:
            where = f"  {_short(item['path'], home)}" if item.get("path") else ""
            out.append(f"  step {item['step']} {item['executor']}{where}: {item['reason']}")
    return out


def run(args: argparse.Namespace) -> int:
    # Deferred: undoing loads the runtime and the undoer, which `metnos --help` does not need.
    from metnos.services.replay import NothingToUndo, undo, user_home

    try:
        plan, result = undo(args.turn_id, dry_run=args.dry_run, force=args.force)
    except NothingToUndo as e:
        print(orjson.dumps({"status": "nothing", "message": str(e)}).decode() if args.json else f"{e}; nothing to do")
        return 0
    home = user_home()
    if args.json:
        print(orjson.dumps({**result.to_json(), "dry_run": args.dry_run}).decode())
    elif result.status == "already-undone":
        print(f"turn {plan.turn_id} was already undone; nothing to do")
    else:
        for line in _lines(result, dry_run=args.dry_run or result.status.startswith("refused"), home=home):
            print(line)
        if plan.resuming:
            print(f"resuming an undo of this turn that was cut short: {len(plan.journal.restored)} of {len(plan.actions)} path(s) were already back")
        if plan.lost:
            print(f"kept files missing or damaged ({len(plan.lost)}):")
            for item in plan.lost:
                print(f"  {_short(item['path'], home)} (step {item['step']}, {item['executor']}): {item['problem']}")
        if plan.conflicts:
            print(f"changed since the turn ({len(plan.conflicts)}):")
            for c in plan.conflicts:
                print(f"  {_short(c.path, home)}: the turn left {c.left}, now {c.now}")
        if result.status == "undone":
            print("undone" + (" (forced over the changes above)" if result.forced else ""))
        elif args.dry_run:
            print("dry run: nothing was changed")
    if result.status == "refused-lost" or (args.dry_run and plan.lost):
        if not args.json:
            print(
                f"metnos: refused: {len(plan.lost)} kept file(s) this undo needs are missing or damaged in the blob store "
                f"({in_force().workspace.blobs_dir}); nothing was changed and the turn is not marked undone. "
                "Restore the blob store from a backup and run `metnos undo` again",
                file=sys.stderr,
            )
        return 1
    if result.status == "refused-remote":
        if not args.json:
            refusal = result.remote_refusal
            print(f"metnos: refused: step {refusal['step']} ran on {refusal['device']}, which did not put its files back "
                  f"({refusal['kind']}): {refusal['message']}; nothing was changed and the turn is not marked undone", file=sys.stderr)
        return 1
    if result.status == "refused" or (args.dry_run and result.status == "would-refuse"):
        if not args.json:
            if all(c.only_mode for c in plan.conflicts):
                print(f"metnos: refused: only the mode of {len(plan.conflicts)} path(s) changed since the turn, their contents are "
                      "as it left them; nothing was changed (--force restores anyway, modes included)", file=sys.stderr)
            else:
                print("metnos: refused: files changed since the turn; nothing was changed (--force restores anyway)", file=sys.stderr)
        return 1
    return 0
