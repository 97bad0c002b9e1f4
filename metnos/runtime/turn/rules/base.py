"""The one interface every rule of a turn is applied through, and the verdicts the loop acts on.

A rule is looked at, in the order of the loop's list, at fixed points of a turn:

* ``on_ask``: the model is about to be asked for the next calls (a rule may say: for words only);
* ``on_call``: a call was proposed (its ``StepProposed`` recorded), before anything of it runs;
* ``on_resolved``: its arguments are resolved (``StepResolved`` recorded for an executor), before it runs;
* ``on_observation``: it ran and its observation is recorded;
* ``on_answer``: an answer was proposed (by the model, a plan, or made from data);
* ``on_conclusion``: the answer the turn is about to give, against the turn's results.

The first rule to return a verdict at a point decides it; ``None`` lets the next
rule look. A rule keeps no state of its own: what it must remember goes in the
turn's state, so a rule can be taken out of the list, or timed, on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from domain.turn import Turn
from domain.canonical import canonical_hash
from metnos.mechanisms.llm.messages import LLMReply, Message, ToolCall
from metnos.runtime.step.catalogue import TurnCatalogue
from metnos.runtime.turn.failures import FailureKind, step_failure_words
from metnos.runtime.turn.interrupts import InterruptGate
from metnos.runtime.turn.offering import acts
from metnos.runtime.step.piping import Resolution
from metnos.runtime.turn.ports import TurnPorts
from metnos.runtime.step.shape import NEEDS_DATA_SOURCE, PIPELINE_ALREADY_CLOSED
from metnos.runtime.turn.turn_state import TurnRequest, TurnState
from metnos.runtime.step.vaglio import GuardPolicy
from metnos.settings import i18n
from metnos.settings.turn import TurnSettings



# Refusals of a call for a step the turn had not taken yet (``top``: a sort before a delete of the largest):
# once a step has worked since, the same call is judged again instead of barred as a repeated failure.
REFUSED_UNTIL_A_STEP = frozenset({"top"})


class TurnLoop(Protocol):
    """What a rule may use of the loop (metnos/runtime/turn/loop.py), which hands itself to the rules it walks."""
    catalogue: TurnCatalogue
    settings: TurnSettings
    policy: GuardPolicy
    ports: TurnPorts
    interrupts: InterruptGate
    check_policy: Callable[[Any, dict[str, Any]], None] | None
    judge: Any
    online: Any
    tool_names: frozenset[str]
    shown_home: str

    def record(self, turn: Turn, event_class: type, **fields: Any) -> None: ...

    def commit(self, turn: Turn, *others: Any) -> None: ...

    def commit_now(self, turn: Turn) -> None: ...

    def step(self, turn: Turn, state: TurnState, request: TurnRequest, pool: list[str], call: ToolCall,
             call_form: str) -> tuple[dict[str, Any], list[Any]]: ...


# Verdicts ------------------------------------------------------------------
@dataclass(frozen=True)
class Settle:
    """The step ends here: this is its observation (nothing more of it runs)."""
    observation: dict[str, Any]
    others: tuple[Any, ...] = ()


@dataclass(frozen=True)
class End:
    """The turn ends with a failure of ``kind``; ``commit`` first when the step's events are still pending."""
    kind: FailureKind
    detail: str
    commit: bool = False


@dataclass(frozen=True)
class AnswerWith:
    """The answer is the data these steps hold."""
    steps: tuple[int, ...]
    reason: str = "duplicate_read_repeated"


@dataclass(frozen=True)
class SendBack:
    """The answer goes back to the model with these messages; the turn goes on."""
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class AnswerInstead:
    """The answer is this text instead (worked out by the runtime); it is concluded again."""
    text: str


@dataclass(frozen=True)
class Unfounded:
    """The answer does not hold up against the results, and nothing more can be done about it."""
    grounding: Any


@dataclass(frozen=True)
class WordsOnly:
    """The model is asked for the answer in words (tool_choice "none"), not for more calls."""


Verdict = Settle | End | AnswerWith | SendBack | AnswerInstead | Unfounded | WordsOnly


# What a rule sees ----------------------------------------------------------
@dataclass
class Round:
    """A round in which the model is about to be asked."""
    loop: TurnLoop
    turn: Turn
    state: TurnState
    request: TurnRequest
    pool: list[str]

    def record(self, event_class: type, **fields: Any) -> None:
        self.loop.record(self.turn, event_class, **fields)


@dataclass
class Step:
    """One proposed call as the rules see it, and what they found out about it."""
    loop: TurnLoop
    turn: Turn
    state: TurnState
    request: TurnRequest
    pool: list[str]
    call: ToolCall
    number: int
    name: str
    args: dict[str, Any]
    te: Any = None
    # builtin | scratchpad | executor (an unknown name is an executor the catalogue lacks).
    kind: str = "executor"
    # Found by the rules: the pipeline shape's transition, the resolved arguments, what was completed.
    transition: Any = None
    resolution: Resolution | None = None
    completed: dict[str, Any] = field(default_factory=dict)
    approval: dict[str, Any] | None = None
    # Where each argument came from (domain/provenance.py), by its dotted path; traced once the arguments are resolved.
    provenance: dict[str, Any] = field(default_factory=dict)
    # Once it ran: whether the process went through, whether the observation is data, the result's kind.
    ran: bool = False
    succeeded: bool = False
    result_kind: str | None = None
    observation: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str]:
        """The call as a repeated call is recognised: its executor and the hash of its proposed arguments.

        As the model wrote them (``[runtime] repeat_as_proposed``): a rule that trims them (a schedule's
        unasked end) left a key the same proposal never met again, and the 0.5B sent one refused schedule
        to the step cap."""
        proposed = self.call.arguments if self.loop.online.config.repeat_as_proposed and isinstance(self.call.arguments, dict) else self.args
        return (self.name, canonical_hash(proposed))

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments the call runs with: resolved when the rules resolved them."""
        return self.resolution.args if self.resolution is not None else self.args

    def record(self, event_class: type, **fields: Any) -> None:
        self.loop.record(self.turn, event_class, **fields)

    def reject(self, kind: str, error: dict[str, Any], observation: dict[str, Any], remediation: dict[str, Any] | None = None) -> Verdict:
        """The call is refused before it runs (``StepRejected``); the refusal is the turn's problem."""
        state, name = self.state, self.name
        self.record(Turn.StepRejected, step=self.number, kind=kind, error=error, observation=observation, remediation=remediation)
        state.guards = state.guards.record(self.number, name, self.args, executed=False, succeeded=False)
        error_class = observation.get("error_class")
        if error_class == PIPELINE_ALREADY_CLOSED:
            return Settle(observation)
        if kind != "arguments":
            # The same call proposed again is refused the same way: it is intercepted like a
            # repeated failure (the 1.5B sent one refused move five times, to the time limit).
            state.failed_calls.setdefault(self.key, self.number)
            if kind in REFUSED_UNTIL_A_STEP:
                state.refused_until_step.add(self.key)
        words = step_failure_words(name, observation)
        if kind in ("policy", "autonomy", "exfiltration"):
            state.problem = (FailureKind.STEP_REFUSED, words)
        elif error_class == NEEDS_DATA_SOURCE:
            state.problem = (FailureKind.NEEDS_INPUTS, i18n.english("turn.needs_data", name=name))
        else:
            state.problem = (FailureKind.STEP_FAILED, words)
            if not acts(self.loop.catalogue, name):
                # A call refused for its form that would have changed nothing: it never ran.
                state.unrun_read = state.problem
        state.since_problem = []
        if kind in ("arguments", "schema"):
            state.argument_errors += 1
            if state.argument_errors > 1:
                # One correction round was given; a second unusable call ends it.
                return End(FailureKind.INVALID_ARGUMENTS, words, commit=True)
        return Settle(observation)

    def refuse(self, observation: dict[str, Any], args: dict[str, Any]) -> Verdict:
        """The call is refused by the vaglio or the user: recorded as its observation, the turn's problem."""
        state = self.state
        self.record(Turn.ObservationRecorded, step=self.number, ok=False, observation=observation, spill={})
        state.guards = state.guards.record(self.number, self.name, args, executed=False, succeeded=False)
        state.problem, state.since_problem = (FailureKind.STEP_REFUSED, step_failure_words(self.name, observation)), []
        if self.loop.online.config.refused_call_repeated:
            # Proposed again word for word, it is a repeated failure: not judged, nor the user asked, again (the
            # 0.5B sent one unapproved commit twenty times, to the end of the model's context).
            state.failed_calls.setdefault(self.key, self.number)
        return Settle(observation)


@dataclass
class Answer:
    """A proposed answer as the rules see it."""
    loop: TurnLoop
    turn: Turn
    state: TurnState
    request: TurnRequest
    pool: list[str]
    messages: list[Message]
    text: str
    # model | plan | data: who proposed it.
    source: str = "model"
    # The model's reply that holds it (for the model's answers).
    reply: LLMReply | None = None
    # Whether it may be sent back to the model (the model wrote it, without a plan).
    repairable: bool = False

    def record(self, event_class: type, **fields: Any) -> None:
        self.loop.record(self.turn, event_class, **fields)


# The interface -------------------------------------------------------------
POINTS = ("on_ask", "on_call", "on_resolved", "on_observation", "on_answer", "on_conclusion")


class Rule(Protocol):
    name: str

    def on_ask(self, round: Round) -> Verdict | None: ...

    def on_call(self, step: Step) -> Verdict | None: ...

    def on_resolved(self, step: Step) -> Verdict | None: ...

    def on_observation(self, step: Step) -> None: ...

    def on_answer(self, answer: Answer) -> Verdict | None: ...

    def on_conclusion(self, answer: Answer) -> Verdict | None: ...


class BaseRule:
    """A rule that looks at nothing: a rule overrides the points it looks at."""
    name = "rule"

    def on_ask(self, round: Round) -> Verdict | None:
        return None

    def on_call(self, step: Step) -> Verdict | None:
        return None

    def on_resolved(self, step: Step) -> Verdict | None:
        return None

    def on_observation(self, step: Step) -> None:
        return None

    def on_answer(self, answer: Answer) -> Verdict | None:
        return None

    def on_conclusion(self, answer: Answer) -> Verdict | None:
        return None

    def __repr__(self) -> str:
        return self.name
