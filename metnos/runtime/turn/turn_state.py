"""What one turn carries from step to step: the request, the outcome, and the state the rules read and write.

The state is the turn's memory between steps; the loop and its rules
(metnos/runtime/turn/rules) are the only writers. How a turn ends early is one of
two exceptions the loop catches: ``EndTurn`` (a failure of a given kind) and
``AnswerFromData`` (the answer is data the steps already hold).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from metnos.mechanisms.sandbox import autonomy
from metnos.runtime.turn.failures import FailureKind
from metnos.runtime.turn.guards import TurnGuards
from metnos.runtime.step.scratchpad import InMemoryScratchpadStore
from metnos.runtime.step.shape import ShapeStep

# Steps of its own a request that changes nothing may take before it is asked for
# the answer: a read, then up to two steps on its data (filter, then count).
READ_ONLY_MODEL_STEPS = 3


@dataclass(frozen=True)
class TurnRequest:
    text: str
    actor: str = "user"
    channel: str = "cli"
    mode: str = "local"
    tier: str = "wise"
    autonomy: str = autonomy.DEFAULT
    # [runtime] of config.toml as this turn runs it (RuntimeConfig.to_json()): the mode, hybrid rules, the LLM judge.
    runtime: dict[str, Any] | None = None
    # The home written "~" in the observations the model is shown: None for the policy's; a replay
    # passes the recorded one ("" for a turn recorded before, when they were shown whole).
    home: str | None = None
    # Who the turn works for: "host" or "guest_<id>" (metnos/runtime/actors.py).
    principal: str = "host"
    # The executors a guest's turn may ask the guest to approve ([actors.guest] approvals); () for the host, who is asked anything.
    approvals: tuple[str, ...] = ()
    # The conversation the turn belongs to, with the earlier turns it is shown (metnos/runtime/turn/conversation.py):
    # None, a turn alone; an "id" of None, a conversation this turn starts.
    conversation: dict[str, Any] | None = None
    # The request's language: None, detected from its text; a replay gives the one recorded.
    language: str | None = None


@dataclass
class TurnOutcome:
    turn_id: str
    status: str  # answered | failed | refused | needs_input | unverified | interrupted
    answer: str | None = None
    failure: dict[str, Any] | None = None
    steps: int = 0
    # Why the mnestome did not learn from this turn, if it did not (the turn is
    # recorded all the same; seeds/002 ch. 11.1: reported, never fatal).
    learning_error: str | None = None
    # Which models answered, in order: {"tier", "role", "model"} (filled from the log by the session).
    models: list[dict[str, str]] = field(default_factory=list)
    # Quarantined executors the request would have been offered, each with why and the command
    # that shows it (metnos/runtime/turn/quarantined.py; filled from the log by the session).
    quarantined: list[dict[str, str]] = field(default_factory=list)
    # Executors with side effects not offered because the learned offer read the request as changing
    # nothing (metnos/runtime/turn/shortlist.py; filled from the log by the session).
    withheld_changes: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        return self.answer if self.answer is not None else (self.failure or {}).get("message", "")


@dataclass
class TurnState:
    step: int = 0
    round: int = 0
    corrections: int = 0
    answer_corrections: int = 0
    # Calls in a row whose arguments could not be used (not JSON, off schema).
    argument_errors: int = 0
    # The last step that went wrong, and what succeeded since (an answer must use it).
    problem: tuple[FailureKind, str] | None = None
    since_problem: list[dict[str, Any]] = field(default_factory=list)
    # (executor, targets) of reads already intercepted once as duplicates.
    intercepted: set[tuple[str, frozenset[str]]] = field(default_factory=set)
    # executor -> the step at which a call of it was intercepted as a duplicate (its data already there).
    duplicated: dict[str, int] = field(default_factory=dict)
    # (executor, hash of the proposed arguments) of calls that failed or were refused -> their step.
    failed_calls: dict[tuple[str, str], int] = field(default_factory=dict)
    # Failed calls already proposed once more and intercepted.
    repeated_failures: set[tuple[str, str]] = field(default_factory=set)
    # Of the failed calls, those refused for what the turn had not done yet (a delete of the largest before a sort).
    refused_until_step: set[tuple[str, str]] = field(default_factory=set)
    remediating: bool = False
    final_only: bool = False
    # The model was stopped for repeating itself (a read it had, a call that had failed, an action done): its next
    # words end the turn.
    looped: bool = False
    pipeline_closed: bool = False
    # Steps the model proposed (opening reads are the turn's own).
    model_steps: int = 0
    # The model, holding data, took a step that did not work on it (a read of its own).
    read_again: bool = False
    # A step with side effects succeeded.
    acted: bool = False
    # The steps whose side effects ran, and every executor or builtin a step tried, by name.
    acted_steps: list[int] = field(default_factory=list)
    # The model proposed an action that had already succeeded, the very same call: it was not run again.
    action_repeated: bool = False
    # ...and then said it could not be done: the answer was made from what the action reported.
    done_told_instead: bool = False
    tried: set[str] = field(default_factory=set)
    # The model, in a request that acts, answered before any action ran and was reminded of it.
    reminded_to_act: bool = False
    # A schedule the request asks for was made; the model was told once that none was.
    scheduled: bool = False
    reminded_to_schedule: bool = False
    # The problem, when it is a call refused for its form that would have changed nothing.
    unrun_read: tuple[FailureKind, str] | None = None
    # The request was restated with the results, asking for the answer in words (once a turn).
    asked_for_words: bool = False
    # The instructions the runtime put in a step's place (an intercepted call's hint): never an answer's words.
    instructions_given: list[str] = field(default_factory=list)
    # Steps whose data answers the request, once the model asked for it twice more.
    answer_from: tuple[int, ...] = ()
    # The step at which the model was first told it held data, nothing having gone wrong yet (0: never): what
    # goes wrong after it is a detour.
    told_clean_at: int = 0
    # The executors the request's own words rank first (metnos.runtime.turn.shortlist.first_by_words).
    worded: tuple[str, ...] = ()
    # A presentation step (describe, render) that closed a request that changes nothing.
    presented: int | None = None
    # What the user answered the turn's questions: values the request did not give but the user did.
    user_answers: list[str] = field(default_factory=list)
    guards: TurnGuards = field(default_factory=TurnGuards)
    observations: dict[int, Any] = field(default_factory=dict)
    # What the turn told the model beside the executors' results, by step: a builtin's result (a schedule's
    # next firing), the note on an action not done twice. Data an answer may give.
    told: dict[int, tuple[str, Any]] = field(default_factory=dict)
    executed: dict[int, tuple[str, str]] = field(default_factory=dict)
    # What each step's output holds (domain/provenance.py: web, mail, a named file ...), by step.
    sources: dict[int, str] = field(default_factory=dict)
    # The steps whose list a limit cut, or that were worked out of one (metnos.runtime.turn.grounding.cut_short).
    cut_short: set[int] = field(default_factory=set)
    # Reads the request does not ask for, proposed after the turn read untrusted content: by step, what was read first.
    reads_content_chose: dict[int, Any] = field(default_factory=dict)
    shape: list[ShapeStep] = field(default_factory=list)
    scratch: InMemoryScratchpadStore = field(default_factory=InMemoryScratchpadStore)
    has_scratch: bool = False
    # What the turn is doing, for the record if a signal stops it there.
    during: str = "between steps"
    # The plan the cascade gave (metnos/cascade), followed until it is done or goes wrong.
    plan: Any = None
    # Online planning (metnos/runtime/turn/hybrid.py): the plan is an online one; its recovery call was spent; a hybrid turn escalated.
    online: bool = False
    recovered: bool = False
    escalated: bool = False
    # The answer was sent back once because it did not hold up against the results (metnos.runtime.turn.grounding).
    grounding_repaired: bool = False
    # ...and it was told to work out an exact ask with a tool: the tools stay offered until a step does.
    working_out: bool = False
    # The exact ask of the request (metnos.runtime.turn.grounding), if it makes one.
    exact: Any = None
    # Metnos proposed the step that works an exact ask out itself (once a turn).
    worked_out_by_runtime: bool = False
    # The answer was made from the data the model asked for twice, after its own did not hold up.
    answered_from_data: bool = False
    # The tier the proposer asks now, and the failure it last climbed for.
    tier: str = "wise"
    climbed_for: Any = None

    def successes(self) -> tuple[int, ...]:
        """The steps whose observation is data (not an error report), in order."""
        return tuple(sorted(step for step, obs in self.observations.items() if isinstance(obs, dict) and obs.get("ok") is not False))

    def executor_of(self, step: int) -> str:
        return self.executed.get(step, ("", ""))[0]

    def went_well(self, observation: dict[str, Any]) -> None:
        """A step gave data: the run of unusable arguments is over, and an answer after a problem may rest on it."""
        self.argument_errors = 0
        if self.problem is not None:
            self.since_problem.append(observation)


class EndTurn(Exception):
    def __init__(self, kind: FailureKind, detail: str) -> None:
        self.kind = kind
        self.detail = detail


class AnswerFromData(Exception):
    """The model asked again for data it already has: answer with that data."""

    def __init__(self, steps: tuple[int, ...], reason: str = "duplicate_read_repeated") -> None:
        self.steps = steps
        self.reason = reason
