"""``metnos turns list|show``: past turns, and one turn as a readable timeline."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from domain.provenance import described
from domain.turn import Turn
from metnos.services.telling import step_failure_words
from metnos.settings import i18n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("turns", help="past turns")
    inner = p.add_subparsers(dest="turns_command", required=True, metavar="SUBCOMMAND")
    ls = inner.add_parser("list", help="the turns, newest last")
    ls.add_argument("--limit", type=int, default=20)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)
    show = inner.add_parser("show", help="one turn as a timeline (an id prefix is enough)")
    show.add_argument("turn_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=run_show)


def _history():  # noqa: ANN202
    # Deferred: booting loads the runtime's modules, which `metnos --help` does not need.
    from metnos.services import turn_history

    return turn_history


def run_list(args: argparse.Namespace) -> int:
    rows, problems = _history().listed(args.limit)
    for problem in problems:
        print(f"metnos: {problem}", file=sys.stderr)
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    print(i18n.said("list.turns"))
    for t in rows:
        status = t["status"] + ("*" if t["undone"] else "")
        print(f"{t['id']:<36}  {t['started'][:19]:<19}  {status:<12} {t['steps']:>5}  {t['text'][:60]}")
    if any(t["undone"] for t in rows):
        print(i18n.said("list.turns_undone"))
    return 0


def _line(event: Any) -> str:
    name = type(event).__name__
    when = event.timestamp.strftime("%H:%M:%S.%f")[:12]
    d = {k: v for k, v in vars(event).items() if k not in ("originator_id", "originator_version", "timestamp", "originator_topic")}
    if isinstance(event, Turn.TurnStarted):
        text = f"request: {event.text!r} (actor {event.actor}, channel {event.channel}, mode {event.mode}, autonomy {event.autonomy})"
        talk = getattr(event, "conversation", None)
        if talk:
            # Which conversation, and how many of its turns the model was shown (docs/turns.md, "Conversations").
            text += f"; conversation {talk['id'][:8]}, shown {len(talk.get('earlier') or [])} earlier turn(s)"
    elif isinstance(event, Turn.PrefilterRanked):
        text = f"candidates: {', '.join(c['name'] for c in event.ranking.get('candidates', [])) or '(none)'} [{event.prefilter_ms} ms]"
    elif isinstance(event, Turn.QuarantinedNotOffered):
        text = "quarantined, not offered: " + "; ".join(f"{e['name']} {e['version']} ({e['reason']})" for e in event.executors)
    elif isinstance(event, Turn.LLMReplied):
        calls = event.reply.get("tool_calls") or []
        said = ", ".join(c["name"] for c in calls) if calls else repr(event.reply.get("text", ""))[:80]
        text = f"model ({event.reply.get('call_form')}): {said} [{event.intent_ms} ms]"
    elif isinstance(event, Turn.PlanConsulted):
        found = f"{event.layer} ({event.how}) plan {str(event.entry)[:8]}" if event.layer else f"no plan: {event.reason}"
        refused = f"; refused {len(event.rejected)}: {event.rejected[0]['why']}" if event.rejected else ""
        text = f"cascade: {found}{refused} [{event.lookup_ms} ms]"
    elif isinstance(event, Turn.PlanAbandoned):
        text = f"plan abandoned at step {event.step}: {event.reason}; the model takes over"
    elif isinstance(event, Turn.StepProposed):
        text = f"step {event.step}: {event.executor} {orjson.dumps(event.args).decode()[:120]}"
    elif isinstance(event, Turn.StepJudgedByModel):
        v = event.verdict
        score = "no score" if v["score"] is None else f"score {v['score']:.2f} (threshold {v['threshold']:.2f})"
        text = f"step {event.step}: LLM judge ({v['tier']}, {v['model'] or 'no model'}): {v['decision']}, {score}: {v['reason'][:120]}"
    elif isinstance(event, Turn.IntentExtracted):
        named = ", ".join(event.tools) or "nothing"
        text = f"intent extractor ({event.tier}, {event.model or 'no model'}): {named}" + (f"; {event.problem}" if event.problem else "")
    elif isinstance(event, Turn.FillerWritten):
        where = f"step {event.step} {event.where}" if event.step is not None else event.where
        wrote = repr(event.text[:100]) if event.text is not None else f"not written: {event.problem}"
        text = f"filler for {where} ({event.tier}, {event.model or 'no model'}): {wrote}"
    elif isinstance(event, Turn.SpillSummarised):
        gist = repr(event.gist[:100]) if event.gist is not None else f"no gist: {event.problem}"
        text = f"step {event.step}: summariser ({event.tier}, {event.model or 'no model'}): {gist}"
    elif isinstance(event, Turn.LLMAsked):
        text = f"asked the {event.tier} tier as {event.role}: {len(event.tools)} tools"
        for message in event.sent or ():
            # What left for the model, whole: a cloud model sees exactly this.
            text += f"\n{'':>38}sent ({message['role']}): " + message["text"].replace("\n", f"\n{'':>38}  ")
    elif isinstance(event, (Turn.StepResolved, Turn.StepJudged)) and event.provenance:
        text = f"step {event.step}: arguments from " + "; ".join(f"{arg} <- {words}" for arg, words in described(event.provenance))
    elif isinstance(event, Turn.StepInvoked):
        text = f"step {event.step}: ran {event.executor} {event.version} -> {'ok' if event.ok else 'failed'} [{event.exec_ms} ms]"
    elif isinstance(event, Turn.ObservationRecorded):
        if event.ok:
            text = f"step {event.step}: observed {orjson.dumps(event.observation).decode()[:120]}"
        else:
            text = f"step {event.step}: {_failure(event.observation)}"
    elif isinstance(event, (Turn.StepRejected, Turn.StepIntercepted)):
        text = f"step {event.step}: not run: {_failure(event.observation)}"
    elif isinstance(event, Turn.AnswerRejected):
        text = f"not an answer ({event.reason}): {event.text[:120]!r}"
    elif isinstance(event, Turn.TurnAnswered):
        text = f"answer: {event.text[:200]}"
    elif isinstance(event, Turn.TurnFailed):
        text = f"{event.status} ({event.kind}): {event.message}"
    elif isinstance(event, Turn.TurnInterrupted):
        text = f"interrupted by {event.signal} {event.during}, at step {event.step}"
    elif isinstance(event, Turn.TurnAbandoned):
        text = f"abandoned after {event.events} events, at step {event.step}: {event.reason}"
    else:
        text = orjson.dumps(d, default=str).decode()[:140]
    return f"{event.originator_version:>3}  {when}  {name:<20} {text}"


def _failure(observation: dict[str, Any]) -> str:
    """A failed step in words, and the end of the executor's stderr when it left one."""

    words = step_failure_words("", observation).strip()
    tail = observation.get("stderr_tail")
    if tail:
        words += "\n" + "\n".join(f"{'':>38}| {line}" for line in str(tail).splitlines()[-12:])
    return words


def run_show(args: argparse.Namespace) -> int:
    if args.json:
        turn_id, data, lost = _history().shown_as_data(args.turn_id)
        print(orjson.dumps({"turn_id": turn_id, "events": data, "undelivered": lost}, default=str).decode())
        return 0
    turn_id, events, lost = _history().shown(args.turn_id)
    print(f"turn {turn_id}")
    for e in events:
        print(_line(e))
    for message in lost:
        print(_undelivered(message))
    return 0


def _undelivered(message: dict[str, Any]) -> str:
    """A message the outbox gave up on, with its text: the answer the user never got."""
    head = (f"UNDELIVERED {message['kind']} to {message['channel']} {message['address']}: given up after "
            f"{message['attempts']} attempt(s) at {message.get('given_up_at', '?')}; last cause: {message['cause']}")
    return head + "\n" + "\n".join(f"{'':>4}| {line}" for line in message["text"].splitlines())
