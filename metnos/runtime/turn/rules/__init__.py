"""The rules a turn applies, as a list the loop walks (metnos/runtime/turn/rules/base.py gives the interface).

The order is the spec's: the checks on a proposed call as docs/architecture.md
("A step") lists them, the vaglio, what an observation means for the turn, then
the checks on an answer as docs/turns.md ("Outcomes") gives them.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from metnos.runtime.turn.rules.answers import ActionTaken, AnswerForm, AnswerOnly, Placeholders, RestsOnRecovery, SaysNotDone, ScheduleMade
from metnos.runtime.turn.rules.base import Answer, BaseRule, Round, Rule, Step, Verdict
from metnos.runtime.turn.rules.calls import AppendOnce, ArgumentSchema, AutonomyLevel, Guards, KnownExecutor, MadeUpValues, PipelineShape, ReadableArguments, RepeatedFailure, RequestedDestination, RequestedKind, RequestedNames, RequestedTop, SandboxPolicy, StepReferences, UnaskedEnd, UnaskedOptions
from metnos.runtime.turn.rules.dialog import Dialog
from metnos.runtime.turn.rules.grounding import Grounded
from metnos.runtime.turn.rules.provenance import Exfiltration
from metnos.runtime.turn.rules.recovery import ClimbTier, Presentation, Recovery
from metnos.runtime.turn.rules.vaglio import Vaglio


def default_rules() -> tuple[Rule, ...]:
    return (
        ClimbTier(), AnswerOnly(),
        Guards(), RepeatedFailure(), ReadableArguments(), AutonomyLevel(), KnownExecutor(), PipelineShape(),
        StepReferences(), ArgumentSchema(), MadeUpValues(), UnaskedOptions(), UnaskedEnd(), RequestedKind(), RequestedNames(), RequestedTop(), AppendOnce(), ScheduleMade(), SandboxPolicy(), RequestedDestination(), Exfiltration(), Vaglio(), Dialog(),
        Recovery(), Presentation(), ActionTaken(),
        Placeholders(), AnswerForm(), RestsOnRecovery(), SaysNotDone(), Grounded(),
    )


def without(*names: str) -> tuple[Rule, ...]:
    """The default rules but those named (to see what a rule is responsible for)."""
    unknown = set(names) - {r.name for r in default_rules()}
    if unknown:
        raise ValueError(f"no rule is named {', '.join(sorted(unknown))}: the rules are {', '.join(r.name for r in default_rules())}")
    return tuple(r for r in default_rules() if r.name not in names)


class Timed(BaseRule):
    """A rule with the time spent in each of its points added up (``seconds[point]``), for bench/turn_runtime.py."""

    def __init__(self, rule: Rule, seconds: dict[str, float] | None = None) -> None:
        self.rule = rule
        self.name = rule.name
        self.seconds: dict[str, float] = seconds if seconds is not None else defaultdict(float)

    def _timed(self, point: str, arg: Any) -> Any:
        started = time.perf_counter()
        try:
            return getattr(self.rule, point)(arg)
        finally:
            self.seconds[point] += time.perf_counter() - started

    def on_ask(self, round: Round) -> Verdict | None:
        return self._timed("on_ask", round)

    def on_call(self, step: Step) -> Verdict | None:
        return self._timed("on_call", step)

    def on_resolved(self, step: Step) -> Verdict | None:
        return self._timed("on_resolved", step)

    def on_observation(self, step: Step) -> None:
        return self._timed("on_observation", step)

    def on_answer(self, answer: Answer) -> Verdict | None:
        return self._timed("on_answer", answer)

    def on_conclusion(self, answer: Answer) -> Verdict | None:
        return self._timed("on_conclusion", answer)


__all__ = ["Answer", "BaseRule", "Round", "Rule", "Step", "Timed", "default_rules", "without"]
