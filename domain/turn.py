"""A turn: one request, the steps taken for it, and how it ended (seeds/002 ch. 2).

Every decision of the loop is an event here, and every input that is not a
pure function of earlier events (the model's replies, the observations, the
approvals, the clock, the ids) is written into one of them, so that a replay
can feed them back and check that the runtime takes the same path.
Fields ending in ``_ms`` are measurements, and ``settings`` and
``runtime_version`` are context: replay shows them but does not compare them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate

OPEN = "open"
ANSWERED = "answered"
FAILED = "failed"
INTERRUPTED = "interrupted"
ABANDONED = "abandoned"
REFUSED = "refused"
NEEDS_INPUT = "needs_input"
# The answer holds parts found in no step's result (metnos/runtime/turn/grounding.py).
UNVERIFIED = "unverified"
# How a turn that did not answer ended. A TurnFailed written before statuses
# existed has no status field and reads as "failed".
END_STATUSES = (FAILED, REFUSED, NEEDS_INPUT, UNVERIFIED)
UNDONE_SUFFIX = "+undone"

# Fields that describe the circumstances of a turn rather than its decisions:
# replay shows them next to a divergence but does not compare them. A changed
# catalogue matters only where the turn's path changes because of it.
CONTEXT_FIELDS = {
    "TurnStarted": frozenset({"settings", "runtime_version"}),
    "CatalogueResolved": frozenset({"digest", "entries"}),
    # The messages as sent are what request_digest is the hash of: compared through it.
    "LLMAsked": frozenset({"sent"}),
}

# Fields added to an event after turns were recorded without them: an old event holds None there,
# and replay does not compare what the runtime now works out with a record that never held it.
LATE_FIELDS = {
    "StepResolved": frozenset({"provenance"}),
    "StepJudged": frozenset({"provenance"}),
}


# Fields added to an event after turns were recorded without them: a recorded event that
# lacks one is read with its default, so an old turn replays as it ran.
DEFAULTED_FIELDS = {
    "TurnStarted": {"principal": "host", "conversation": None, "language": "en", "approvals": None},
}


def is_measurement(field: str) -> bool:
    return field.endswith("_ms")


def decision_fields(event_name: str, state: dict[str, Any]) -> dict[str, Any]:
    """The part of an event's state that replay compares."""
    context = CONTEXT_FIELDS.get(event_name, frozenset())
    state = {**DEFAULTED_FIELDS.get(event_name, {}), **state}
    fields = {k: v for k, v in state.items() if k not in context and not is_measurement(k)}
    if event_name == "PrefilterRanked" and isinstance(fields.get("ranking"), dict):
        # Which executors were offered is the decision; their versions and how many
        # entries the catalogue held (a builtin added since) are the catalogue's
        # business, compared where an executor actually runs.
        ranking = {k: v for k, v in fields["ranking"].items() if k != "catalogue_size"}
        ranking["candidates"] = [{k: v for k, v in c.items() if k != "version"} for c in ranking.get("candidates", [])]
        fields["ranking"] = ranking
    return fields


class Turn(MetnosAggregate):
    class TurnStarted(Created):
        text: str
        actor: str
        channel: str
        mode: str
        settings: dict
        runtime_version: str
        # How far the turn may go (metnos/mechanisms/sandbox/autonomy.py); turns recorded before the level existed ran supervised.
        autonomy: str = "supervised"
        # [runtime] as the turn ran it (mode, hybrid rules, the LLM judge); None before it was recorded.
        runtime: dict | None = None
        # The home written "~" in what the model was shown; None before observations were shown so.
        home: str | None = None
        # Who the turn works for (seeds/002 ch. 11.2.4): "host" or "guest_<id>"; turns recorded before actors were the host's.
        principal: str = "host"
        # The conversation the turn belongs to and what the model was shown of its earlier turns
        # (metnos/runtime/turn/conversation.py): {"id", "key", "earlier": [...]}; None: a turn alone (all before conversations).
        conversation: dict | None = None
        # The request's language (metnos/settings/i18n/detect.py): the runtime's own words are said in it and, when
        # it is not English, the model is asked to answer in it. Turns recorded before it was kept were English.
        language: str = "en"
        # The executors a guest's turn could ask the guest to approve ([actors.guest] approvals); None: none, and
        # every host turn (the host is asked anything), as all turns recorded before guests could approve.
        approvals: list | None = None

    class CatalogueResolved(DomainEvent):
        digest: str
        entries: list

    class PrefilterRanked(DomainEvent):
        ranking: dict
        prefilter_ms: int

    class QuarantinedNotOffered(DomainEvent):
        """Executors the request would have been offered, ranked with the live ones by the same
        rules, that are quarantined: each ``{"name", "version", "origin", "check", "reason"}``. The
        turn's outcome tells the user which and why (metnos/runtime/turn/quarantined.py)."""

        executors: list

    class LLMAsked(DomainEvent):
        round: int
        tier: str
        request_digest: str
        tools: list
        # Who asks: the proposer (the planner), the judge, the online planner, its recovery.
        role: str = "proposer"
        # The messages as sent, for calls that may leave the machine (online planning, its recovery, the judge).
        sent: list | None = None

    class LLMReplied(DomainEvent):
        round: int
        reply: dict
        intent_ms: int

    class LLMFailed(DomainEvent):
        round: int
        error_type: str
        message: str

    class StepProposed(DomainEvent):
        step: int
        call_id: str
        executor: str
        args: dict
        call_form: str

    class StepIntercepted(DomainEvent):
        """A guard answered in the executor's place (duplicate read, caps)."""

        step: int
        decision: dict
        observation: dict

    class StepRejected(DomainEvent):
        """The call was refused before running: unknown executor, shape, piping, schema, policy."""

        step: int
        kind: str
        error: dict
        observation: dict
        remediation: dict | None

    class StepResolved(DomainEvent):
        step: int
        args: dict
        pipings: list
        # Arguments the model left out and the request supplied (metnos/runtime/turn/completion.py).
        completed: dict | None = None
        # Where each argument came from, by its dotted path (domain/provenance.py); None before it was recorded.
        provenance: dict | None = None

    class StepJudged(DomainEvent):
        step: int
        verdict: dict
        vaglio_ms: int
        # A builtin's step (a schedule) records no StepResolved: where its arguments came from is recorded here.
        provenance: dict | None = None

    class TierEscalated(DomainEvent):
        """A step failed and the proposer moved up to the next distinct tier ([runtime] escalate_tiers)."""

        round: int
        from_tier: str
        to_tier: str
        reason: str

    class ModeEscalated(DomainEvent):
        """A hybrid turn left the local loop for one online plan (metnos/runtime/turn/online.py), and why."""

        round: int
        reason: str
        tier: str

    class OnlinePlanProposed(DomainEvent):
        """The plan one online call proposed, as the loop follows it (steps shifted past those
        already taken, the answer as template segments), or ``problem`` when the reply was no plan."""

        round: int
        plan: dict | None
        problem: str | None
        recovery: bool

    class IntentExtracted(DomainEvent):
        """What the intent extractor (metnos/runtime/turn/intent_model.py) named: the executors it joins to the shortlist."""

        tools: list
        tier: str
        model: str
        problem: str | None = None

    class SpillSummarised(DomainEvent):
        """The scratchpad summariser's gist of a spilled observation (metnos/runtime/turn/summariser.py)."""

        step: int
        scratchpad_id: str
        gist: str | None
        tier: str
        model: str
        problem: str | None = None

    class FillerWritten(DomainEvent):
        """A ${FILLER: ...} of an online plan, written by the fast tier (metnos/runtime/turn/filler.py)."""

        step: int | None
        where: str
        instruction: str
        text: str | None
        tier: str
        model: str
        problem: str | None = None

    class StepJudgedByModel(DomainEvent):
        """The LLM judge's verdict on a step (metnos/runtime/turn/judge.py): score, reason, threshold, decision, tier, model."""

        step: int
        verdict: dict

    class ApprovalAsked(DomainEvent):
        step: int
        executor: str
        reason: str

    class ApprovalAnswered(DomainEvent):
        step: int
        approved: bool
        by: str

    class DialogAsked(DomainEvent):
        """The turn asked the user a question on the channel and waits for the answer (the atomic
        dialog of seeds/002: get_inputs for a missing target, request_location_from_user).
        ``executor`` and ``argument`` name the call and the argument the answer fills ("" when the
        answer goes to the model as the step's observation)."""

        step: int
        channel: str
        tool: str
        question: str
        executor: str
        argument: str

    class DialogAnswered(DomainEvent):
        """What came back: the answer (``answered``), or nothing (``by`` says why: a timeout, no
        terminal, the daemon stopping). The answer is the user's own words, recorded as given."""

        step: int
        channel: str
        answered: bool
        answer: str | None
        by: str

    class ApprovalWaived(DomainEvent):
        """The vaglio asked, and the turn's autonomy level answered instead of
        the user (``full``, a side effect undo could reverse). No longer
        recorded: the seeds keep the question at every level; kept so turns
        recorded before still read (their replay now asks there, and says so)."""

        step: int
        executor: str
        reason: str
        autonomy: str

    class StepInvoked(DomainEvent):
        step: int
        invocation_id: str
        executor: str
        version: str
        digest: str
        args_hash: str
        ok: bool
        kind: str
        exec_ms: int

    class BuiltinCalled(DomainEvent):
        """A runtime builtin answered in the step (the recurring-task tools): what it said."""

        step: int
        name: str
        observation: dict

    class ObservationRecorded(DomainEvent):
        step: int
        ok: bool
        observation: dict
        spill: dict

    class DataPiped(DomainEvent):
        """Data passed from one step's executor to another's: what the mnestome learns from."""

        src_step: int
        src_executor: str
        src_version: str
        src_field: str
        dst_step: int
        dst_executor: str
        dst_version: str
        dst_arg: str
        mechanism: str

    class AnswerRejected(DomainEvent):
        """The model's text was not an answer (empty, a tool name, raw tool output,
        a call written as text, a stub): it was sent back once with the reason."""

        round: int
        reason: str
        text: str

    class AnswerUngrounded(DomainEvent):
        """The answer did not hold up against the turn's results: ``unmatched``
        are its parts found in no step's result nor in the request, ``exactness``
        why it does not meet an exact ask ("" when it does), ``denied`` the files
        it says are missing or unreadable although a step read them, ``bare`` why
        an answer that names nothing the steps found cannot stand after the model
        was stopped for repeating itself. The model is told once; a second such
        answer ends the turn unverified."""

        round: int
        text: str
        unmatched: list
        exactness: str
        denied: list | None = None
        bare: str | None = None

    class AnswerComposed(DomainEvent):
        """Metnos, not the model, wrote the answer: from what ``from_steps`` produced
        (the model kept asking for data it already had)."""

        from_steps: list
        reason: str

    class PlanConsulted(DomainEvent):
        """The cascade was asked for a plan before the model (metnos/cascade).

        ``layer`` is L0 or L1 on a hit, None on a miss; ``plan`` the plan the
        turn then follows; ``reason`` why it missed; ``rejected`` the
        candidates the validator (L2) turned down, with why."""

        layer: str | None
        entry: str | None
        how: str | None
        plan: dict | None
        similarity: float | None
        reason: str | None
        rejected: list
        lookup_ms: int

    class PlanAbandoned(DomainEvent):
        """A followed plan went wrong at ``step``; the model takes the turn over from there."""

        step: int
        reason: str

    class TurnAnswered(DomainEvent):
        text: str
        steps: int

        def apply(self, turn: Turn) -> None:
            turn.status = ANSWERED

    class TurnFailed(DomainEvent):
        """The turn ended without an answer. ``status`` says how: failed (something
        broke), refused (a fence or the user said no), needs_input (the request
        lacks what acting needs), unverified (the answer held parts found in no
        step's result; ``message`` names them)."""

        # Version 1 had no status: every such turn failed.
        class_version = 2

        @staticmethod
        def upcast_v1_v2(state: dict) -> None:
            state["status"] = FAILED

        kind: str
        final_kind: str
        message: str
        steps: int
        status: str = FAILED

        def apply(self, turn: Turn) -> None:
            turn.status = self.status if self.status in END_STATUSES else FAILED

    class TurnInterrupted(DomainEvent):
        """The process running the turn was told to stop (SIGINT, SIGTERM) and closed it.

        ``step`` is the step reached, ``during`` what the turn was doing
        ("while waiting for the model", "while waiting for approval", "between steps").
        """

        signal: str
        step: int
        during: str

        def apply(self, turn: Turn) -> None:
            turn.status = INTERRUPTED

    class TurnAbandoned(DomainEvent):
        """Another process closed a turn whose writer is gone (SIGKILL, power cut).

        ``step`` is the last step in the log, ``events`` how many of the
        turn's events were committed before its writer went away.
        """

        step: int
        events: int
        reason: str

        def apply(self, turn: Turn) -> None:
            turn.status = ABANDONED

    class TurnUndone(DomainEvent):
        restored: list
        not_undoable: list
        forced: bool

        def apply(self, turn: Turn) -> None:
            turn.undone = True

    def __init__(self, text: str, actor: str, channel: str, mode: str, settings: dict, runtime_version: str, language: str = "en") -> None:
        self.text = text
        self.language = language
        self.actor = actor
        self.channel = channel
        self.mode = mode
        self.status = OPEN
        self.undone = False

    @classmethod
    def start(cls, *, id: Any, at: Any, text: str, actor: str, channel: str, mode: str, settings: dict, runtime_version: str, autonomy: str = "supervised",
              runtime: dict | None = None, home: str | None = None, principal: str = "host", conversation: dict | None = None,
              language: str = "en", approvals: list | None = None) -> Turn:  # noqa: A002
        return cls._create(cls.TurnStarted, id=id, timestamp=at, text=text, actor=actor, channel=channel, mode=mode, settings=settings,
                           runtime_version=runtime_version, autonomy=autonomy, runtime=runtime, home=home, principal=principal, conversation=conversation,
                           language=language, approvals=approvals)

    def record(self, event_class: type, *, at: Any, **fields: Any) -> None:
        """Append one of this aggregate's events; the loop decides which and when."""
        if self.status != OPEN and event_class is not Turn.TurnUndone:
            msg = f"turn {self.id} is {self.status}; it records nothing more but its undo"
            raise ValueError(msg)
        self.trigger_event(event_class, timestamp=at, **fields)


# How a turn stops before its end: replay follows it to where it stopped.
STOPPED_EARLY = (Turn.TurnInterrupted, Turn.TurnAbandoned)


def status_of(events: list[Any]) -> str:
    """How a turn stands after its events, read through their own apply hooks
    (a bare namespace stands for the aggregate, so a gap in the events cannot
    stop the reading)."""
    turn = SimpleNamespace(status=OPEN, undone=False)
    for event in events[1:]:
        event.apply(turn)
    return turn.status
