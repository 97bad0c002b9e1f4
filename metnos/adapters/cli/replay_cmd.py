"""``metnos replay``: run a past turn again from the log and check it took the same path."""

from __future__ import annotations

import argparse
import sys

import orjson

from domain.errors import MetnosError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a turn from the log and report the first divergence")
    p.add_argument("turn_id", nargs="?", help="the turn (an id prefix is enough)")
    p.add_argument("--all", action="store_true", help="replay every turn")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--live-llm", action="store_true", help="ask the configured model again, with the recorded observations")
    mode.add_argument("--re-execute", action="store_true", help="run idempotent, side-effect-free executors again and report drift")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Deferred: replaying loads the runtime and the replayer, which `metnos --help` does not need.
    from metnos.services.replay import format_divergence, format_drift, replay

    if not args.all and not args.turn_id:
        raise MetnosError("name a turn (see `metnos turns list`) or pass --all")
    replayed = replay(args.turn_id, every=args.all, live_llm=args.live_llm, re_execute=args.re_execute)
    results, elapsed = replayed.results, replayed.elapsed_s
    diverged, drifted = replayed.diverged, replayed.drifted
    if args.json:
        print(orjson.dumps({"turns": len(results), "diverged": len(diverged), "results": [r.to_json() for r in results]}, default=str).decode())
    else:
        for r in diverged:
            print(format_divergence(r))
        for r in drifted:
            for d in r.drift:
                print(format_drift(r.turn_id, d))
        if not diverged:
            what = f"{len(results)} turns" if args.all else f"turn {results[0].turn_id}"
            print(f"{what}: same path ({sum(r.events for r in results)} events, {elapsed:.2f} s)")
        for r in results:
            if r.stopped and r.same_path:
                print(f"turn {r.turn_id} {r.stopped}: replayed to where it stopped, same path")
    if diverged:
        print(f"metnos: {len(diverged)} of {len(results)} turns diverged", file=sys.stderr)
        return 1
    if drifted:
        print(f"metnos: {len(drifted)} of {len(results)} turns drifted: re-executed, an executor observes something else now", file=sys.stderr)
        return 1
    return 0
