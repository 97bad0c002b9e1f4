"""``metnos replay``: run a past turn again from the log and check it took the same path."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import orjson

from metnos.settings.workspace import Workspace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a turn from the log and report the first divergence")
    p.add_argument("turn_id", nargs="?", help="the turn (an id prefix is enough)")
    p.add_argument("--all", action="store_true", help="replay every turn")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--live-llm", action="store_true", help="ask the configured model again, with the recorded observations")
    mode.add_argument("--re-execute", action="store_true", help="run idempotent, side-effect-free executors again and report drift")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def _re_executor(runtime: Any):  # noqa: ANN202
    from metnos.mechanisms.executors.context import build_ctx
    from metnos.mechanisms.invocation.runner import invoke

    def run_again(name: str, args: dict[str, Any]) -> dict[str, Any] | None:
        loaded = runtime.report.get(name)
        if loaded is None or loaded.manifest.contract.side_effects or not loaded.manifest.contract.idempotent:
            return None
        ctx = build_ctx(now=runtime.clock().isoformat(), workspace=runtime.workspace, profile=loaded.profile, name=name, version=loaded.version)
        outcome = invoke(loaded.dir, loaded.profile, args, loaded.input_schema, loaded.output_schema, workspace=runtime.workspace, ctx=ctx)
        if outcome.ok and outcome.output is not None:
            return outcome.output
        return {"ok": False, "error": {"kind": outcome.kind, **outcome.error}}

    return run_again


def run(args: argparse.Namespace) -> int:
    from replay.report import format_divergence
    from metnos.services.queries import find_turn
    from metnos.errors import MetnosError
    from metnos.runtime.booted import Runtime
    from replay.replayer import Replayer

    if not args.all and not args.turn_id:
        raise MetnosError("name a turn (see `metnos turns list`) or pass --all")
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        router = None
        ask_llm = None
        if args.live_llm:
            from metnos.mechanisms.llm.router import LLMRouter
            from metnos.settings.llm_tiers import load_llm_settings

            router = LLMRouter(load_llm_settings(rt.workspace.config_file), rt.workspace)
            ask_llm = lambda tier, messages, tools, tool_choice="auto", constraint=None: router.for_tier(tier).complete(  # noqa: E731
                list(messages), list(tools), temperature=0, tool_choice=tool_choice, constraint=constraint)
        try:
            replayer = Replayer(rt, ask_llm=ask_llm, re_execute=_re_executor(rt) if args.re_execute else None)
            ids = list(replayer.turn_ids()) if args.all else [find_turn(rt.turns.catch_up(rt.log), args.turn_id)]
            started = time.perf_counter()
            results = [replayer.replay(t) for t in ids]
            elapsed = time.perf_counter() - started
        finally:
            if router is not None:
                router.close()
    diverged = [r for r in results if not r.same_path]
    drifted = [r for r in results if r.drift]
    if args.json:
        print(orjson.dumps({"turns": len(results), "diverged": len(diverged), "results": [r.to_json() for r in results]}, default=str).decode())
    else:
        for r in diverged:
            print(format_divergence(r))
        for r in drifted:
            for d in r.drift:
                print(f"turn {r.turn_id} step {d['step']}: {d['executor']} now observes something else than recorded (compared by {d['compared']})")
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
