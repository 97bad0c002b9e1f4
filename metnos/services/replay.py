"""Replaying turns from the log, undoing a turn, and refolding the read models."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metnos.mechanisms.executors.context import build_ctx
from metnos.mechanisms.invocation.runner import invoke
from metnos.mechanisms.sandbox.hints import home_of
from metnos.runtime.booted import Runtime
from metnos.services import remote_calls, wiring
from metnos.services.queries import find_turn
from replay.rebuild import rebuild as refold
from replay.replayer import Replayer
from replay.report import format_divergence, format_drift
from replay.undo import NothingToUndo, Undoer

# Re-exported for the adapters: what an undo may answer, and a divergence and a drift in words.
__all__ = ["NothingToUndo", "Replayed", "Undoer", "format_divergence", "format_drift", "rebuild", "replay", "replay_one", "undo", "undo_plan", "undoer_of", "user_home"]


@dataclass
class Replayed:
    results: list[Any]
    elapsed_s: float

    @property
    def diverged(self) -> list[Any]:
        return [r for r in self.results if not r.same_path]

    @property
    def drifted(self) -> list[Any]:
        return [r for r in self.results if r.drift]


def _re_executor(runtime: Runtime) -> Callable[[str, dict[str, Any]], dict[str, Any] | None]:
    def run_again(name: str, args: dict[str, Any]) -> dict[str, Any] | None:
        loaded = runtime.report.get(name)
        if loaded is None or loaded.manifest.contract.side_effects or not loaded.manifest.contract.idempotent:
            return None
        if loaded.manifest.device is not None:
            return None  # it observes another machine: running it here would compare the wrong world
        ctx = build_ctx(now=runtime.clock().isoformat(), workspace=runtime.workspace, profile=loaded.profile, name=name, version=loaded.version)
        outcome = invoke(loaded.dir, loaded.profile, args, loaded.input_schema, loaded.output_schema, workspace=runtime.workspace, ctx=ctx)
        if outcome.ok and outcome.output is not None:
            return outcome.output
        return {"ok": False, "error": {"kind": outcome.kind, **outcome.error}}

    return run_again


def replay(turn_ref: str | None, *, every: bool = False, live_llm: bool = False, re_execute: bool = False) -> Replayed:
    """``metnos replay``: one turn (an id prefix), or every turn; ``live_llm`` asks the configured model again
    with the recorded observations, ``re_execute`` runs idempotent, side-effect-free executors again."""
    with wiring.boot(birth=False) as rt:
        router = None
        ask_llm = None
        if live_llm:
            router = wiring.llm_router(rt.workspace)
            # Asked again under the grammar the turn was asked under, where there was one.
            ask_llm = lambda tier, messages, tools, tool_choice="auto", constraint=None: router.for_tier(tier).complete(  # noqa: E731
                list(messages), list(tools), temperature=0, tool_choice=tool_choice, constraint=constraint)
        try:
            replayer = Replayer(rt, ask_llm=ask_llm, re_execute=_re_executor(rt) if re_execute else None)
            ids = list(replayer.turn_ids()) if every else [find_turn(rt.turns.catch_up(rt.log), turn_ref or "")]
            started = time.perf_counter()
            results = [replayer.replay(t) for t in ids]
            elapsed = time.perf_counter() - started
        finally:
            if router is not None:
                router.close()
    return Replayed(results, elapsed)


def replay_one(runtime: Runtime, turn_ref: str) -> dict[str, Any]:
    """One turn replayed on a held runtime (the daemon's), as the API answers it."""
    turn_id = find_turn(runtime.turns.state(), turn_ref)
    result = Replayer(runtime).replay(turn_id)
    diff = format_divergence(result) if not result.same_path else ""
    return {**result.to_json(), "same_path": result.same_path, "diff": diff}


def undoer_of(runtime: Runtime) -> Undoer:
    """The undoer of a runtime, with a step that ran on a device put back through that device."""
    return Undoer(runtime, remote_undo=lambda trace_id, force: remote_calls.undo(runtime, trace_id, force=force))


def undo_plan(runtime: Runtime, turn_id: str | None) -> tuple[Undoer, Any] | None:
    """The undoer and its plan for ``turn_id`` (the last turn not yet undone when None); None: nothing to undo."""
    undoer = undoer_of(runtime)
    try:
        return undoer, undoer.plan(turn_id)
    except NothingToUndo:
        return None


def undo(turn_ref: str | None, *, dry_run: bool, force: bool) -> tuple[Any, Any]:
    """``metnos undo``: the plan for the turn (the last one not yet undone by default) and what came of it:
    a preview with ``dry_run``, else the files put back. Raises NothingToUndo."""
    with wiring.boot(birth=False) as rt:
        undoer = undoer_of(rt)
        turn_id = find_turn(rt.turns.catch_up(rt.log), turn_ref) if turn_ref else None
        plan = undoer.plan(turn_id)
        result = undoer.preview(plan, force=force) if dry_run else undoer.apply(plan, force=force)
    return plan, result


def user_home() -> str:
    """The user's home as an undo's paths are shown against (``~/...``)."""
    return os.path.realpath(home_of(os.environ))


def rebuild(names: list[str], *, progress: Callable[[str, int, int], None] | None = None,
            workers: int | None = None) -> tuple[dict[str, int], int, float]:
    """``metnos rebuild``: the projections refolded from the log; their sizes, the log's head and the seconds it took."""
    with wiring.boot(birth=False) as rt:
        started = time.perf_counter()
        sizes = refold(rt, names, progress=progress, workers=workers)
        elapsed = time.perf_counter() - started
        head = rt.log.recorder.max_notification_id() or 0
    return sizes, head, elapsed
