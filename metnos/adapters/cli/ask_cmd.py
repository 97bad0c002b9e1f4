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
from metnos.services import telling
from metnos.settings import i18n
from metnos.settings.commands import FREE_WARNING
from metnos.settings.i18n.detect import language_of
from metnos.settings.loader import in_force
from metnos.settings.sandbox import OFF_WARNING, sandbox_off

# How `metnos ask` exits, by the turn's status (README, "Exit codes"). 2 is
# argparse's for a bad command line.
EXIT_CODES = {"answered": 0, "failed": 1, "refused": 3, "needs_input": 4, "unverified": 5}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="ask Metnos something, in plain words")
    p.add_argument("text", help="the request")
    p.add_argument("--steps", action="store_true", help="show each step as it runs")
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("--yes", action="store_true", help="approve every action of this turn that asks for approval, "
                        "at any autonomy level (recorded as by flag:--yes), but one whose target came from content the turn read")
    answer.add_argument("--no", action="store_true", help="decline every action that asks for approval")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("--continue", action="store_true", dest="continuing",
                      help="follow the last turn asked here: the model sees the conversation's earlier requests, answers and "
                           "(cut short) results, so \"and the last one?\" has something to refer to (a new conversation after "
                           "[conversation] idle_minutes)")
    talk.add_argument("--new", action="store_true", help="a turn alone, that a later --continue follows (the default)")
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
    p.add_argument("--model", help="the embedded model for this turn: a size (0.5b, 1.5b), a GGUF file (a path, or a "
                                        "name in the models folder) or an Ollama model (ollama:NAME[:TAG])")
    p.set_defaults(run=run)


def approver_for(args: argparse.Namespace, language: str = i18n.SOURCE) -> Callable[[int, str, dict[str, Any], str], tuple[bool, str]]:
    """The approval asked at the terminal, in the request's ``language``."""
    said = i18n.in_force()

    def approve(step: int, executor: str, call_args: dict[str, Any], reason: str) -> tuple[bool, str]:
        if args.yes:
            return True, "flag:--yes"
        if args.no:
            return False, "flag:--no"
        stdin = sys.stdin
        if stdin is None or stdin.closed or not stdin.isatty():
            # Nobody can answer: the safe answer is no, and the user is told.
            print(f"metnos: {said.text('ask.approval_no_terminal', language, step=step, executor=executor)}", file=sys.stderr)
            return False, "no-terminal"
        shown = orjson.dumps(call_args).decode()
        print(f"\n{said.text('ask.approval_step', language, step=step, executor=executor, args=shown[:300])}\n  {i18n.said_words(reason, language)}",
              file=sys.stderr)
        try:
            reply = input(said.text("ask.approve_prompt", language)).strip().lower()
        except EOFError:
            print(f"\nmetnos: {said.text('ask.approval_closed_input', language, step=step, executor=executor)}", file=sys.stderr)
            return False, "user:closed-input"
        return reply in said.text("ask.yes_words", language).split(), "user:prompt"

    return approve


def asker_for(args: argparse.Namespace, language: str = i18n.SOURCE) -> Callable[[Any], tuple[str | None, str]]:
    """A turn's question (a missing target, where the user is) asked at the terminal, in the request's
    ``language``; with none, no answer: the turn ends needs_input, saying how to give it."""
    said = i18n.in_force()

    def ask(question: Any) -> tuple[str | None, str]:
        stdin = sys.stdin
        asked = i18n.said_words(question.question, language)
        if stdin is None or stdin.closed or not stdin.isatty():
            print(f"metnos: {said.text('ask.question_no_terminal', language, step=question.step, question=asked)}", file=sys.stderr)
            return None, "no-terminal"
        print(f"\n{said.text('ask.question_step', language, step=question.step, question=asked)}", file=sys.stderr)
        try:
            reply = input(said.text("ask.answer_prompt", language))
        except EOFError:
            print(f"\nmetnos: {said.text('ask.question_closed_input', language, step=question.step)}", file=sys.stderr)
            return None, "user:closed-input"
        return reply, "user:prompt"

    return ask


def progress_line(text: str) -> None:
    """One line on stderr for a phase of the turn (the model starting, a step)."""
    sys.stderr.write(f"metnos: {text}\n")
    sys.stderr.flush()


def phase_printer_for(language: str = i18n.SOURCE) -> Callable[[Any], None]:
    """Without --steps, off a terminal: a line for each step, in the request's ``language``, so a log shows where the time went."""
    said = i18n.in_force()

    def phase_printer(event: Any) -> None:
        if isinstance(event, Turn.StepProposed) and not sys.stderr.isatty():
            progress_line(said.text("ask.progress_step", language, step=event.step, executor=event.executor))

    return phase_printer


phase_printer = phase_printer_for()


def step_printer(event: Any) -> None:
    out = sys.stderr
    if isinstance(event, Turn.PrefilterRanked):
        names = [c["name"] for c in event.ranking.get("candidates", [])]
        out.write(f"· candidates: {', '.join(names) or '(none)'}\n")
    elif isinstance(event, Turn.QuarantinedNotOffered):
        out.write(f"· quarantined, not offered: {', '.join(e['name'] for e in event.executors)}\n")
    elif isinstance(event, Turn.StepProposed):
        out.write(f"· step {event.step}: {event.executor} {orjson.dumps(event.args).decode()[:200]}\n")
    elif isinstance(event, Turn.DialogAnswered):
        out.write(f"  answered: {event.answer}\n" if event.answered else f"  no answer ({event.by})\n")
    elif isinstance(event, (Turn.StepRejected, Turn.StepIntercepted)):
        out.write(f"  refused: {orjson.dumps(event.observation).decode()[:200]}\n")
    elif isinstance(event, Turn.ObservationRecorded):
        mark = "ok" if event.ok else "failed"
        out.write(f"  {mark}: {orjson.dumps(event.observation).decode()[:200]}\n")
    out.flush()


def answered_by(models: list[dict[str, str]], language: str = i18n.SOURCE) -> str:
    """Which models answered the turn, in ``language``, e.g. 'answered by qwen (wise tier, 2 calls as proposer)'."""
    said = i18n.in_force()
    seen: dict[tuple[str, str], list[str]] = {}
    for m in models:
        seen.setdefault((m["model"] or said.text("ask.unnamed_model", language), m["tier"]), []).append(m["role"])
    parts = [said.text("ask.answered_by_model", language, model=model, tier=tier, roles=", ".join(dict.fromkeys(roles)),
                       calls=said.text("ask.one_call", language) if len(roles) == 1 else said.text("ask.calls", language, count=len(roles)))
             for (model, tier), roles in seen.items()]
    return said.text("ask.answered_by", language, models="; ".join(parts))


def run(args: argparse.Namespace) -> int:
    # Deferred: running a turn loads the whole runtime; `metnos --help` and the other commands stay fast.
    from metnos.services import turns

    turns.check_request(args.text)
    if sandbox_off():
        print(f"metnos: {OFF_WARNING}", file=sys.stderr)
    if in_force().settings.commands.shell == "free":
        print(f"metnos: {FREE_WARNING}", file=sys.stderr)
    # The runtime's own words of this turn are said in the request's language, as the turn records it.
    language = language_of(args.text, i18n.in_force().languages())
    asked = turns.asked(
        args.text, approver=approver_for(args, language), asker=asker_for(args, language), model=getattr(args, "model", None),
        overrides=getattr(args, "runtime_set", None) or (), progress=progress_line,
        observer=step_printer if args.steps else phase_printer_for(language),
        waiting=lambda limits: WaitingForModel(limits, language=language).wrap,
        interrupts=getattr(args, "interrupts", None), cache=not getattr(args, "no_cache", False),
        level=getattr(args, "autonomy", None), mode=getattr(args, "mode", None), offer_plan=sys.stdout.isatty(),
        continuing=getattr(args, "continuing", False),
    )
    outcome = asked.outcome
    if outcome.learning_error is not None:
        print(f"metnos: {i18n.in_force().text('ask.not_learnt', language, error=outcome.learning_error)}", file=sys.stderr)
    if asked.outbox:
        # A message the turn sent that waits in the outbox for the daemon, or was given up: said, never silent.
        print(f"metnos: {asked.outbox}", file=sys.stderr)
    return print_outcome(outcome, as_json=args.json, offer=asked.offer, language=language)


def print_outcome(outcome: Any, *, as_json: bool, offer: str | None = None, language: str = i18n.SOURCE) -> int:
    """The outcome on the terminal, and the exit code. Only an answer goes to standard output:
    an unverified one is on standard error, marked, with the parts found in no step's result."""
    if as_json:
        print(orjson.dumps({**telling.outcome_json(outcome), "learning_error": outcome.learning_error, "models": outcome.models}).decode())
    elif outcome.status == "answered":
        print(outcome.answer)
        if outcome.models:
            print(f"metnos: {answered_by(outcome.models, language)}", file=sys.stderr)
        if offer is not None:
            print(f"metnos: {offer}", file=sys.stderr)
    elif outcome.status == "interrupted":
        said = i18n.in_force().text("ask.interrupted", language, message=outcome.message, turn_id=outcome.turn_id)
        print(f"metnos: {said}", file=sys.stderr)
    elif outcome.status == telling.UNVERIFIED:
        first, *rest = telling.unverified_lines(outcome, language)
        print("\n".join([f"metnos: {first}", *(f"metnos: {line}" for line in rest[:-1]), rest[-1]]), file=sys.stderr)
    else:
        print(f"metnos: {telling.why(outcome)}", file=sys.stderr)
    if not as_json:
        for notice in telling.notices(outcome, language):
            print(f"metnos: {notice}", file=sys.stderr)
    if outcome.status == "interrupted":
        return 128 + signal.Signals[outcome.failure["signal"]].value
    return EXIT_CODES.get(outcome.status, 1)
