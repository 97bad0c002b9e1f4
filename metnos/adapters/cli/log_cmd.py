"""``metnos log check|salvage``: what a damaged log still holds, and a new log made of it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("log", help="check the log record by record, or salvage a damaged one")
    inner = p.add_subparsers(dest="log_command", required=True, metavar="SUBCOMMAND")
    check = inner.add_parser("check", help="read every record; name each one that cannot be read and the turns it touches "
                                           "(exit 1 when any is damaged)")
    check.add_argument("--json", action="store_true")
    check.set_defaults(run=run_check)
    salvage = inner.add_parser("salvage", help="write every intact event into a new data folder and fold its projections "
                                               "(the old log is only read)")
    salvage.add_argument("new_dir", metavar="NEW_DIR", type=Path, help="a new (or empty) folder for the salvaged data")
    salvage.add_argument("--json", action="store_true")
    salvage.set_defaults(run=run_salvage)


def run_check(args: argparse.Namespace) -> int:
    from metnos.services import log_repair  # deferred: it loads the runtime, which `metnos --help` does not need

    checked = log_repair.check(args.settings.workspace)
    found, kinds, turns = checked.survey, checked.kinds, checked.turns
    touched = found.touched()
    if args.json:
        print(orjson.dumps({
            "log": str(found.path), "intact": len(found.intact), "damaged": found.damaged,
            "damage": [{"position": d.position, "reason": d.reason, "aggregate": d.aggregate, "version": d.version, "recovered": d.recovered}
                       for d in found.damage],
            "intact_positions": sorted(found.intact), "recovered_from_pages": sorted(found.recovered), "notes": found.notes, "turns": turns,
            "touched": {a: {"kind": kinds[a], "versions": sorted(v)} for a, v in touched.items()},
            "unattributed": len(found.unattributed()),
        }).decode())
        return 1 if found.damaged else 0
    if not found.damaged:
        print(f"log at {found.path}: {len(found.intact)} events, every one intact")
        return 0
    lost = [d for d in found.damage if not d.recovered]
    print(f"log at {found.path} is damaged: {len(found.intact)} events intact, {len(lost)} lost, "
          f"{len(found.damage)} positions the log cannot read")
    for note in found.notes:
        print(f"  {note}")
    for line in _damage_lines(found.damage):
        print(f"  {line}")
    for aggregate in sorted(touched):
        print(f"  {kinds[aggregate] or 'an aggregate with no event left'} {aggregate}: lost its events {_ranges(touched[aggregate])}")
    if found.recovered:
        print(f"  of those, {len(found.recovered)} were found whole on the file's pages "
              f"(events {_ranges(sorted(found.recovered))}): salvage keeps them")
    if turns:
        print(f"turns touched ({len(turns)}): {', '.join(turns)}")
    if found.unattributed():
        print(f"{len(found.unattributed())} damaged records cannot be tied to a turn (the log's index does not name them)")
    print("to keep everything intact: `metnos log salvage NEW_DIR` writes it into a new data folder (this log is only read)")
    return 1


def run_salvage(args: argparse.Namespace) -> int:
    from metnos.services import log_repair  # deferred: it loads the runtime, which `metnos --help` does not need

    workspace = args.settings.workspace
    done = log_repair.salvage(workspace, args.new_dir)
    if args.json:
        print(orjson.dumps({
            "data_dir": str(done.data_dir), "events": done.events, "turns_whole": sorted(done.turns_whole),
            "turns_cut": done.turns_cut, "aggregates_lost": done.aggregates_lost, "dropped": done.dropped,
            "damage": len(done.survey.damage), "projections": sorted(done.projections),
        }).decode())
        return 0
    found = done.survey
    print(f"salvaged {done.events} events of {found.path} into {done.data_dir / 'log'}")
    print(f"  {len(found.damage)} positions could not be read through the log ({len(found.recovered)} of them were found whole "
          f"on its pages and kept); {done.dropped} intact events came after an aggregate's lost one and were left out")
    print(f"  turns kept whole: {len(done.turns_whole)}; turns cut and closed as damaged: {len(done.turns_cut)}")
    for turn_id in sorted(done.turns_cut):
        print(f"    {turn_id}")
    if done.aggregates_lost:
        print(f"  lost from their first event: {', '.join(done.aggregates_lost)}")
    print(f"  projections folded from the new log: {', '.join(sorted(done.projections))}")
    print(f"to use it, stop the daemon, then: mv {workspace.data_dir} {workspace.data_dir}.damaged && mv {done.data_dir} {workspace.data_dir}")
    return 0


def _damage_lines(damage: list[Any]) -> list[str]:
    """One line a reason, naming the positions (as ranges past a few) and the turns' versions."""
    by_reason: dict[str, list[Any]] = {}
    for d in damage:
        by_reason.setdefault(d.reason, []).append(d)
    lines = []
    for reason, items in by_reason.items():
        positions = _ranges([d.position for d in items])
        lines.append(f"event{'s' if len(items) > 1 else ''} {positions}: {reason}")
    return lines


def _ranges(numbers: list[int]) -> str:
    parts: list[str] = []
    start = prev = None
    for n in sorted(numbers):
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(parts)
