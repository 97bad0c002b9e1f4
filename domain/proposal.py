"""A synt proposal: one run of the seven-stage generation pipeline (seeds/000 ch. 7).

Every stage is an event on the proposal, so ``metnos events`` and
``metnos synt show`` read the same history, and the proposals projection is
a fold of it. The two gates are approvals by the user: the specification
(stage 2), then the code, profile and test results (stage 6). Nothing is
installed without both, and a proposal that failed or was rejected is
closed for good.

Statuses, in order::

    requested -> awaiting_spec -> drafting -> awaiting_code -> approved -> installed
    any open status -> rejected | failed
"""

from __future__ import annotations

from typing import Any

from domain.base import Created, DomainEvent, MetnosAggregate

REQUESTED = "requested"
AWAITING_SPEC = "awaiting_spec"
DRAFTING = "drafting"
AWAITING_CODE = "awaiting_code"
APPROVED = "approved"
INSTALLED = "installed"
REJECTED = "rejected"
FAILED = "failed"
CLOSED = (INSTALLED, REJECTED, FAILED)

# The promoter's verdicts on a draft awaiting the code approval.
PROMOTED = "promoted"
HELD = "held"
VERDICTS = (PROMOTED, HELD)

# The kinds of proposal: the reactive and introspective arms of the cascade.
KINDS = ("generate", "merge", "generalise", "specialise")


class ProposalError(ValueError):
    """A step the proposal's status does not allow (approving a closed proposal, ...)."""


class Proposal(MetnosAggregate):
    class ProposalOpened(Created):
        """Stage 1: the pattern or the request that motivates a new executor."""

        kind: str
        request: str
        source: dict
        run_id: str

    class SpecificationDrafted(DomainEvent):
        """Stage 2: what the executor must do, as the model wrote it and as it was validated."""

        spec: dict
        tier: str
        model: str

        def apply(self, p: Proposal) -> None:
            p.status = AWAITING_SPEC
            p.spec = self.spec

    class SpecificationApproved(DomainEvent):
        by: str

        def apply(self, p: Proposal) -> None:
            p.status = DRAFTING

    class DraftWritten(DomainEvent):
        """Stage 3: main.py and tests/birth.py from the model (round 0, or 1 for the repair)."""

        round: int
        files: dict
        capabilities: dict
        tier: str
        model: str

        def apply(self, p: Proposal) -> None:
            p.round = self.round
            p.files = self.files

    class ProfileDerived(DomainEvent):
        """Stage 4: the tightest profile for the approved specification and this draft."""

        round: int
        ok: bool
        capabilities: dict
        profile: dict
        problems: list

        def apply(self, p: Proposal) -> None:
            p.capabilities = self.capabilities

    class StaticChecked(DomainEvent):
        """No eval, exec, compile, __import__ or importlib; imports within what the capabilities allow."""

        round: int
        ok: bool
        problems: list

    class BirthTested(DomainEvent):
        """Stage 5: the birth tests run in the sandbox under the derived profile."""

        round: int
        ok: bool
        cases: list
        failure: str | None

        def apply(self, p: Proposal) -> None:
            if self.ok:
                p.status = AWAITING_CODE

    class CodeApproved(DomainEvent):
        """Stage 6: the user saw code, profile and test results, and said yes."""

        by: str
        draft_digest: str

        def apply(self, p: Proposal) -> None:
            p.status = APPROVED
            p.approved_digest = self.draft_digest

    class ExecutorInstalled(DomainEvent):
        """Stage 7: signed and installed under executors/synt/NAME/VERSION."""

        name: str
        version: str
        digest: str
        path: str

        def apply(self, p: Proposal) -> None:
            p.status = INSTALLED

    class ProposalEvaluated(DomainEvent):
        """The promoter's reading of a draft waiting for the code approval (seeds/002 ch. 11.2):
        ``promoted`` when no killer holds (offered in the morning digest), ``held`` otherwise.
        Nothing is approved or installed by it; the user's gate stays."""

        verdict: str
        killers: list
        signals: dict
        draft_digest: str

        def apply(self, p: Proposal) -> None:
            p.evaluation = {"verdict": self.verdict, "draft_digest": self.draft_digest}

    class ProposalRejected(DomainEvent):
        stage: str
        reason: str
        by: str

        def apply(self, p: Proposal) -> None:
            p.status = REJECTED

    class ProposalFailed(DomainEvent):
        stage: str
        reason: str

        def apply(self, p: Proposal) -> None:
            p.status = FAILED

    def __init__(self, kind: str, request: str, source: dict, run_id: str) -> None:
        self.kind = kind
        self.request = request
        self.source = source
        self.run_id = run_id
        self.status = REQUESTED
        self.spec: dict[str, Any] | None = None
        self.files: dict[str, str] | None = None
        self.capabilities: dict[str, Any] | None = None
        self.round = 0
        self.approved_digest: str | None = None
        self.evaluation: dict[str, Any] | None = None

    @classmethod
    def open(cls, *, id: Any, kind: str, request: str, source: dict, run_id: str, at: Any) -> Proposal:
        if kind not in KINDS:
            msg = f"unknown proposal kind {kind!r} (kinds: {', '.join(KINDS)})"
            raise ProposalError(msg)
        return cls._create(cls.ProposalOpened, id=id, kind=kind, request=request, source=source, run_id=run_id, timestamp=at)

    def _require(self, *statuses: str) -> None:
        if self.status not in statuses:
            msg = f"proposal {self.run_id} is {self.status}, not {' or '.join(statuses)}"
            raise ProposalError(msg)

    def draft_spec(self, *, spec: dict, tier: str, model: str, at: Any) -> None:
        self._require(REQUESTED)
        self.trigger_event(self.SpecificationDrafted, spec=spec, tier=tier, model=model, timestamp=at)

    def approve_spec(self, *, by: str, at: Any) -> None:
        self._require(AWAITING_SPEC)
        self.trigger_event(self.SpecificationApproved, by=by, timestamp=at)

    def write_draft(self, *, round: int, files: dict, capabilities: dict, tier: str, model: str, at: Any) -> None:
        self._require(DRAFTING)
        self.trigger_event(self.DraftWritten, round=round, files=files, capabilities=capabilities, tier=tier, model=model, timestamp=at)

    def derive_profile(self, *, round: int, ok: bool, capabilities: dict, profile: dict, problems: list, at: Any) -> None:
        self._require(DRAFTING)
        self.trigger_event(self.ProfileDerived, round=round, ok=ok, capabilities=capabilities, profile=profile,
                           problems=problems, timestamp=at)

    def check_statically(self, *, round: int, ok: bool, problems: list, at: Any) -> None:
        self._require(DRAFTING)
        self.trigger_event(self.StaticChecked, round=round, ok=ok, problems=problems, timestamp=at)

    def record_birth(self, *, round: int, ok: bool, cases: list, failure: str | None, at: Any) -> None:
        self._require(DRAFTING)
        self.trigger_event(self.BirthTested, round=round, ok=ok, cases=cases, failure=failure, timestamp=at)

    def approve_code(self, *, by: str, draft_digest: str, at: Any) -> None:
        self._require(AWAITING_CODE)
        self.trigger_event(self.CodeApproved, by=by, draft_digest=draft_digest, timestamp=at)

    def record_install(self, *, name: str, version: str, digest: str, path: str, at: Any) -> None:
        self._require(APPROVED)
        self.trigger_event(self.ExecutorInstalled, name=name, version=version, digest=digest, path=path, timestamp=at)

    def evaluate(self, *, verdict: str, killers: list, signals: dict, draft_digest: str, at: Any) -> None:
        self._require(AWAITING_CODE)
        if verdict not in VERDICTS:
            msg = f"unknown verdict {verdict!r} (verdicts: {', '.join(VERDICTS)})"
            raise ProposalError(msg)
        self.trigger_event(self.ProposalEvaluated, verdict=verdict, killers=killers, signals=signals,
                           draft_digest=draft_digest, timestamp=at)

    def reject(self, *, reason: str, by: str, at: Any) -> None:
        if self.status in CLOSED:
            msg = f"proposal {self.run_id} is already {self.status}"
            raise ProposalError(msg)
        self.trigger_event(self.ProposalRejected, stage=self.status, reason=reason, by=by, timestamp=at)

    def fail(self, *, stage: str, reason: str, at: Any) -> None:
        if self.status in CLOSED:
            msg = f"proposal {self.run_id} is already {self.status}"
            raise ProposalError(msg)
        self.trigger_event(self.ProposalFailed, stage=stage, reason=reason, timestamp=at)
