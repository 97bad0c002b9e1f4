"""``metnos ask "..."``: one turn, from the request to the answer."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from typing import Any

import orjson

from domain.turn import Turn
from metnos.adapters.cli.waiting import WaitingForModel
from metnos.settings.loader import for_workspace
from metnos.settings.workspace import Workspace

# How `metnos ask` exits, by the turn's status (README, "Exit codes"). 2 is
# argparse's for a bad command line.
EXIT_CODES = {"answered": 0, "failed": 1, "refused": 3, "needs_input": 4, "unverified": 5}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="ask Metnos something, in plain words")
    p.add_argument("text", help="the request")
    p.add_argument("--steps", action="store_true", help="show each step as it runs")
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("--yes", action="store_true", help="approve every action of this turn that asks for approval, "
                        "at any autonomy level (recorded as by flag:--yes)")
    answer.add_argument("--no", action="store_true", help="decline every action that asks for approval")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.add_argument("--no-cache", action="store_true", help="ask the model even when an approved plan or a learnt template fits")
    p.add_argument("--mode", choices=("local", "online", "hybrid"),
                   help="local asks the model step by step; online asks once for the whole plan; hybrid starts local and "
                        "escalates by [runtime.hybrid] (default: [runtime] mode of config.toml)")
    p.add_argument("--autonomy", choices=("read_only", "supervised", "full"),
                   help="how far this turn may go: read_only only looks; supervised (default) asks before a side effect that "
                        "cannot be repeated safely (delete, move, write, send); full asks the same, the seeds let it widen only "
                        "the sandbox, which no policy widens yet (default: [runtime] autonomy of config.toml)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="runtime_set",
                   help="a [runtime] key of config.toml for this turn, its value as config.toml writes it: intent=model, "
                        "judge.enabled=true, fillers=false, summarise_spills=true (repeatable)")
    p.add_argument("--model", help="the embedded model for this turn: a size (0.5b, 1.5b) or the path of any GGUF file")
    p.set_defaults(run=run)


def approver_for(args: argparse.Namespace) -> Callable[[int, str, dict[str, Any], str], tuple[bool, str]]:
    def approve(step: int, executor: str, call_args: dict[str, Any], reason: str) -> tuple[bool, str]:
        if args.yes:
            return True, "flag:--yes"
        if args.no:
            return False, "flag:--no"
        stdin = sys.stdin
        if stdin is None or stdin.closed or not stdin.isatty():
            # Nobody can answer: the safe answer is no, and the user is told.
            print(f"metnos: step {step}: {executor} needs your approval and there is no terminal to ask on"
                  " (standard input is closed or not a terminal); taken as no. --yes approves, --no declines.", file=sys.stderr)
            return False, "no-terminal"
        shown = orjson.dumps(call_args).decode()
        print(f"\nstep {step}: {executor} {shown[:300]}\n  {reason}", file=sys.stderr)
        try:
            reply = input("  approve? [y/N] ").strip().lower()
        except EOFError:
            print(f"\nmetnos: standard input closed at the approval of step {step} ({executor}); taken as no", file=sys.stderr)
            return False, "user:closed-input"
        return reply in ("y", "yes"), "user:prompt"

    return approve


def progress_line(text: str) -> None:
    """One line on stderr for a phase of the turn (the model starting, a step)."""
    sys.stderr.write(f"metnos: {text}\n")
    sys.stderr.flush()


def phase_printer(event: Any) -> None:
    """Without --steps, off a terminal: a line for each step, so a log shows where the time went."""
    if isinstance(event, Turn.StepProposed) and not sys.stderr.isatty():
        progress_line(f"step {event.step}: {event.executor}")


def require_embedded_models(settings: Any, workspace: Workspace) -> None:
    """Before any boot: a chosen embedded model that is not on disk is one line naming the fix, not a failed turn."""
    from metnos.mechanisms.llm.errors import ModelNotInstalled
    from metnos.mechanisms.llm.model_files import install_hint
    from metnos.mechanisms.llm.router import embedded_model_files

    for path in embedded_model_files(settings, workspace):
        if not path.is_file():  # a warm server is only ever reused for the same file, so none can stand in
            raise ModelNotInstalled(str(path), install_hint(path))


def step_printer(event: Any) -> None:
    out = sys.stderr
    if isinstance(event, Turn.PrefilterRanked):
        names = [c["name"] for c in event.ranking.get("candidates", [])]
        out.write(f"· candidates: {', '.join(names) or '(none)'}\n")
    elif isinstance(event, Turn.QuarantinedNotOffered):
        out.write(f"· quarantined, not offered: {', '.join(e['name'] for e in event.executors)}\n")
    elif isinstance(event, Turn.StepProposed):
        out.write(f"· step {event.step}: {event.executor} {orjson.dumps(event.args).decode()[:200]}\n")
    elif isinstance(event, (Turn.StepRejected, Turn.StepIntercepted)):
        out.write(f"  refused: {orjson.dumps(event.observation).decode()[:200]}\n")
    elif isinstance(event, Turn.ObservationRecorded):
        mark = "ok" if event.ok else "failed"
        out.write(f"  {mark}: {orjson.dumps(event.observation).decode()[:200]}\n")
    out.flush()


def model_limits(runtime: Any, settings: Any = None) -> Callable[[str], tuple[str, float]]:
    from metnos.mechanisms.llm.transport import public_url

    settings = settings if settings is not None else for_workspace(runtime.workspace).llm()

    def limits(tier: str) -> tuple[str, float]:
        config = settings.tier(tier).config
        url = config.effective_url
        return (public_url(url) if url else "the embedded model"), config.timeout_s

    return limits


def answered_by(models: list[dict[str, str]]) -> str:
    """Which models answered the turn, e.g. 'answered by qwen (wise tier, 2 calls as proposer)'."""
    seen: dict[tuple[str, str], list[str]] = {}
    for m in models:
        seen.setdefault((m["model"] or "an unnamed model", m["tier"]), []).append(m["role"])
    parts = [f"{model} ({tier} tier, {len(roles)} call{'s' if len(roles) > 1 else ''} as {', '.join(dict.fromkeys(roles))})"
             for (model, tier), roles in seen.items()]
    return "answered by " + "; ".join(parts)


def run(args: argparse.Namespace) -> int:
    import os

    from metnos.runtime.cascade.book import PlanBook
    from metnos.mechanisms.llm.router import LLMRouter
    from metnos.runtime.booted import Runtime
    from metnos.mechanisms.sandbox.bwrap import sandbox_off
    from metnos.settings.sandbox import OFF_WARNING
    from metnos.runtime.turn.session import check_request, run_turn

    check_request(args.text)
    # The settings were read before the command ran, --model, --mode, --autonomy and --set with them:
    # a key set for this turn that config.toml would refuse stopped there, before any model started.
    loaded = args.settings
    if sandbox_off():
        print(f"metnos: {OFF_WARNING}", file=sys.stderr)
    env = dict(os.environ)
    workspace = loaded.workspace
    settings = loaded.llm()
    require_embedded_models(settings, workspace)
    with Runtime.boot(workspace) as runtime, LLMRouter(settings, workspace, env=env, progress=progress_line) as router:
        waiting = WaitingForModel(model_limits(runtime, settings))
        outcome = run_turn(
            runtime, args.text, approver=approver_for(args), router=router,
            observer=step_printer if args.steps else phase_printer, wrap_llm=waiting.wrap,
            interrupts=getattr(args, "interrupts", None), cache=not getattr(args, "no_cache", False),
            level=getattr(args, "autonomy", None), mode=getattr(args, "mode", None),
            overrides=getattr(args, "runtime_set", None) or (),
        )
        offer = PlanBook(runtime).offer(outcome.turn_id) if outcome.status == "answered" and sys.stdout.isatty() else None
    if outcome.learning_error is not None:
        print(f"metnos: the mnestome did not learn from this turn: {outcome.learning_error}", file=sys.stderr)
    return print_outcome(outcome, as_json=args.json, offer=offer)


def print_outcome(outcome: Any, *, as_json: bool, offer: str | None = None) -> int:
    """The outcome on the terminal, and the exit code. Only an answer goes to standard output:
    an unverified one is on standard error, marked, with the parts found in no step's result."""
    from metnos.runtime.turn import telling

    if as_json:
        print(orjson.dumps({**telling.outcome_json(outcome), "learning_error": outcome.learning_error, "models": outcome.models}).decode())
    elif outcome.status == "answered":
        print(outcome.answer)
        if outcome.models:
            print(f"metnos: {answered_by(outcome.models)}", file=sys.stderr)
        if offer is not None:
            print(f"metnos: {offer}", file=sys.stderr)
    elif outcome.status == "interrupted":
        print(f"metnos: {outcome.message}; turn {outcome.turn_id} is recorded as interrupted"
              " (`metnos undo` puts back what its finished steps changed)", file=sys.stderr)
    elif outcome.status == telling.UNVERIFIED:
        first, *rest = telling.unverified_lines(outcome)
        print("\n".join([f"metnos: {first}", *(f"metnos: {line}" for line in rest[:-1]), rest[-1]]), file=sys.stderr)
    else:
        print(f"metnos: {telling.why(outcome)}", file=sys.stderr)
    if not as_json:
        for notice in telling.notices(outcome):
            print(f"metnos: {notice}", file=sys.stderr)
    if outcome.status == "interrupted":
        return 128 + signal.Signals[outcome.failure["signal"]].value
    return EXIT_CODES.get(outcome.status, 1)
