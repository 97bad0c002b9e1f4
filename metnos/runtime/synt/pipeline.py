"""The generation arm of synt: the seven stages of seeds/000 ch. 7, each an event.

1. request (or the recurring pattern) opens a Proposal;
2. the model drafts a specification, validated, shown to the user: gate one;
3. the model drafts main.py and tests/birth.py;
4. the tightest profile for the approved specification and that draft, never
   wider than what was approved;
5. static checks, then the birth tests in the sandbox under that profile,
   with one repair round fed by the failure;
6. code, profile and test results shown to the user: gate two;
7. signed and installed under ``executors/synt/NAME/1.0.0/``.

A failed stage records why and stops; a declined gate rejects. Every stage
is committed when it happens, so an interrupted run resumes from its last
stage (``metnos synt approve``) and ``synt show`` tells where it stands. The
files written at stages 5 and 7 are rebuilt from the events, so what is
installed is exactly what the log says was approved.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from uuid import UUID

from domain.proposal import (
    APPROVED,
    AWAITING_CODE,
    AWAITING_SPEC,
    DRAFTING,
    REQUESTED,
    Proposal,
)
from domain.canonical import canonical_hash
from domain.errors import MetnosError
from metnos.mechanisms.executors.birth import Spawn
from metnos.mechanisms.executors.manifest import load_manifest
from metnos.mechanisms.llm.errors import LLMError
from metnos.mechanisms.llm.messages import AssistantMessage, UserMessage
from metnos.runtime.synt.fusion import FUSING_KINDS, fuse_sources
from metnos.runtime.synt.prompts import DraftProblem, draft_messages, parse_draft, repair_messages, spec_messages
from metnos.runtime.synt.spec import VERSION, SpecProblem, Specification, first_json_object, validate_spec, write_folder
from metnos.runtime.synt.static import BY_CAPABILITY, check_draft, needed_capabilities
from metnos.runtime.taken_names import taken_names
from projections.proposals import find
from domain.proposal import ProposalError
from metnos.mechanisms.invocation.birth import birth_of_folder
from metnos.mechanisms.executors.install import install_executor
from metnos.mechanisms.executors.keys import load_signing_key
from metnos.mechanisms.executors.signing import SigningError, verify_executor

# (gate, the proposal as the projection shows it) -> (True: approved, False: declined, None: not now; who answered)
Approver = Callable[[str, dict[str, Any]], tuple[bool | None, str]]

# Enough for a specification or two small files; a runaway reply is cut, not waited for.
SPEC_TOKENS = 900
DRAFT_TOKENS = 1500
# Capabilities whose use the imports reveal: dropped when the draft shows no use of them.
_DROPPABLE = ("network", "code:exec")


class SyntError(MetnosError):
    """A proposal that cannot be found or moved."""


def run_id_of(proposal_id: Any) -> str:
    # Ids are ULIDs: their head is the clock, their tail is random.
    return proposal_id.hex[-8:]


def draft_digest(spec: Mapping[str, Any], files: Mapping[str, str], capabilities: Mapping[str, Any]) -> str:
    return canonical_hash({"spec": dict(spec), "files": dict(files), "capabilities": dict(capabilities)})


def _within(value: str, approved: list[str]) -> bool:
    return any(value == a or value.startswith(a.rstrip("/") + "/") for a in approved)


def derive_profile(approved: Mapping[str, Any], declared: Mapping[str, Any], files: Mapping[str, str]
                   ) -> tuple[dict[str, Any], list[str]]:
    """(the tightest capabilities, problems): never more than ``approved``."""
    problems = []
    for key, value in declared.items():
        if key not in BY_CAPABILITY:
            problems.append(f"the draft asks for {key!r}, which is not a capability")
            continue
        if not value:
            continue
        granted = approved.get(key)
        if not granted:
            problems.append(f"the draft asks for {key} {value!r}, which the approved specification does not grant")
        elif isinstance(value, list):
            beyond = [v for v in value if not isinstance(v, str) or not _within(v, list(granted))]
            if beyond:
                problems.append(f"the draft asks for {key} {beyond!r}, beyond the approved {granted!r}")
    needed = needed_capabilities(files)
    tight: dict[str, Any] = {}
    for key, granted in approved.items():
        if not granted:
            continue
        asked = declared.get(key)
        if asked and isinstance(asked, list) and isinstance(granted, list):
            tight[key] = [v for v in asked if _within(v, granted)]
        elif key in _DROPPABLE and not asked and key not in needed:
            continue
        else:
            tight[key] = granted
    return tight, problems


class Synt:
    def __init__(self, runtime: Any, *, provider: Any = None, tier: str = "wise", spawn: Spawn | None = None) -> None:
        self.runtime = runtime
        self.provider = provider
        self.tier = tier
        self._spawn = spawn

    # ---- reading
    def state(self) -> dict[str, Any]:
        return self.runtime.proposals.catch_up(self.runtime.log)

    def view(self, proposal: Proposal) -> dict[str, Any]:
        return self.state()["proposals"][str(proposal.id)]

    def get(self, key: str) -> Proposal:

        found = find(self.state(), key)
        if found is None:
            msg = f"no proposal {key!r} (or more than one starts so); see `metnos synt list`"
            raise SyntError(msg)
        return self.runtime.log.repository.get(UUID(found["id"]))

    def taken_names(self) -> set[str]:

        return taken_names(self.runtime.catalogue_state())

    # ---- stage 1
    def open(self, request: str, *, source: dict[str, Any], kind: str = "generate") -> Proposal:
        pid = self.runtime.ids()
        p = Proposal.open(id=pid, kind=kind, request=request, source=source, run_id=run_id_of(pid), at=self.runtime.clock())
        self._save(p)
        return p

    def reject(self, key: str, *, reason: str, by: str) -> Proposal:
        p = self.get(key)

        try:
            p.reject(reason=reason, by=by, at=self.runtime.clock())
        except ProposalError as e:
            raise SyntError(str(e)) from None
        self._save(p)
        return p

    def advance(self, p: Proposal, approve: Approver) -> Proposal:
        """Run stages until the proposal is closed or waits for an answer nobody gave."""
        while True:
            if p.status == REQUESTED:
                self._specify(p)
            elif p.status in (AWAITING_SPEC, AWAITING_CODE):
                gate = "specification" if p.status == AWAITING_SPEC else "code"
                verdict, by = approve(gate, self.view(p))
                if verdict is None:
                    return p
                if not verdict:
                    p.reject(reason=f"declined at the {gate} approval", by=by, at=self.runtime.clock())
                elif gate == "specification":
                    p.approve_spec(by=by, at=self.runtime.clock())
                else:
                    p.approve_code(by=by, draft_digest=draft_digest(p.spec or {}, p.files or {}, p.capabilities or {}),
                                   at=self.runtime.clock())
                self._save(p)
            elif p.status == DRAFTING:
                self._draft(p)
            elif p.status == APPROVED:
                self._install(p)
            else:
                return p

    # ---- stages 2 to 7
    def _complete(self, messages: list, max_tokens: int) -> Any:
        if self.provider is None:
            msg = "synt needs a model for this stage and none is configured"
            raise SyntError(msg)
        return self.provider.complete(messages, max_tokens=max_tokens)

    def _specify(self, p: Proposal) -> None:
        taken = self.taken_names()
        messages = spec_messages(p.request, existing=sorted(taken))
        first_problem = ""
        for round_ in (0, 1):
            try:
                reply = self._complete(messages, SPEC_TOKENS)
            except LLMError as e:
                self._fail(p, "specification", f"the model ({self.tier} tier) did not answer: {e}")
                return
            try:
                spec = validate_spec(first_json_object(reply.text), taken=taken)
            except SpecProblem as e:
                shown = " ".join(reply.text.split())[:200]
                if round_ == 1:
                    self._fail(p, "specification", f"{e} (the model replied: {shown!r}; before the repair round: {first_problem})")
                    return
                first_problem = str(e)
                # One repair round, fed by the problem, as for the draft.
                messages = [*messages, AssistantMessage(text=reply.text),
                            UserMessage(f"That specification cannot be used: {e}. Reply with the corrected JSON object only.")]
                continue
            p.draft_spec(spec=spec.model_dump(mode="json"), tier=self.tier, model=reply.model or self.provider.model,
                         at=self.runtime.clock())
            self._save(p)
            return

    def _draft(self, p: Proposal) -> None:
        spec = Specification.model_validate(p.spec)
        approved = spec.capabilities
        files: dict[str, str] = {}
        failure = ""
        stage = "draft"
        for round_ in (0, 1):
            messages = draft_messages(spec, approved) if round_ == 0 else repair_messages(spec, approved, files, failure)
            try:
                reply = self._complete(messages, DRAFT_TOKENS)
            except LLMError as e:
                self._fail(p, "draft", f"the model ({self.tier} tier) did not answer: {e}")
                return
            try:
                files, declared = parse_draft(reply.text)
            except DraftProblem as e:
                shown = " ".join(reply.text.split())[:300]
                stage, failure = "draft", f"{e} (the model replied: {shown!r})"
                p.check_statically(round=round_, ok=False, problems=[failure], at=self.runtime.clock())
                self._save(p)
                continue
            at = self.runtime.clock
            p.write_draft(round=round_, files=files, capabilities=declared, tier=self.tier,
                          model=reply.model or self.provider.model, at=at())
            capabilities, problems = derive_profile(approved, declared, files)
            profile: dict[str, Any] = {}
            if not problems:
                folder = self._materialise(p, spec, files, capabilities)
                profile = load_manifest(folder / "manifest.toml").sandbox_profile().model_dump(mode="json")
            p.derive_profile(round=round_, ok=not problems, capabilities=capabilities, profile=profile,
                             problems=problems, at=at())
            self._save(p)
            if problems:
                stage, failure = "profile", "; ".join(problems)
                continue
            static = [str(x) for x in check_draft(files, capabilities)]
            p.check_statically(round=round_, ok=not static, problems=static, at=at())
            self._save(p)
            if static:
                stage, failure = "static checks", "; ".join(static)
                continue
            result = self._birth(folder)
            cases = [{"name": c.name, "ok": c.ok, "error": c.error} for c in result.cases]
            p.record_birth(round=round_, ok=result.ok, cases=cases, failure=result.failure, at=at())
            self._save(p)
            if result.ok:
                return
            stage, failure = "birth tests", result.failure or "no birth test ran"
        self._fail(p, stage, f"{failure} (after one repair round)")

    def _staging(self, p: Proposal) -> Path:
        return self.runtime.workspace.runtime_dir / "synt" / p.run_id

    def _materialise(self, p: Proposal, spec: Specification, files: Mapping[str, str], capabilities: Mapping[str, Any]) -> Path:
        folder = self._staging(p) / spec.name / VERSION
        shutil.rmtree(self._staging(p), ignore_errors=True)
        return write_folder(folder, spec, files, capabilities, run_id=p.run_id, created_at=p.created_on.isoformat())

    def _birth(self, folder: Path) -> Any:

        return birth_of_folder(folder, self.runtime.workspace, now=self.runtime.clock().isoformat(),
                               config=self.runtime.config, spawn=self._spawn)

    def _install(self, p: Proposal) -> None:

        spec = Specification.model_validate(p.spec)
        files, capabilities = p.files or {}, p.capabilities or {}
        if draft_digest(p.spec or {}, files, capabilities) != p.approved_digest:
            self._fail(p, "install", "the draft differs from the one approved")
            return
        folder = self._materialise(p, spec, files, capabilities)
        origin_dir = self.runtime.workspace.executors_origin_dir("synt")
        try:
            final = install_executor(folder, origin_dir, load_signing_key(self.runtime.workspace))
        except SigningError as e:
            self._fail(p, "install", f"signing refused it: {e}")
            return
        finally:
            shutil.rmtree(self._staging(p), ignore_errors=True)
        check = verify_executor(final, self.runtime.verify_key)
        if not check.ok:
            shutil.rmtree(final, ignore_errors=True)
            self._fail(p, "install", f"the installed folder does not verify: {check.failure}")
            return
        at = self.runtime.clock()
        p.record_install(name=spec.name, version=VERSION, digest=check.digest or "",
                         path=str(final.relative_to(self.runtime.workspace.executors_dir)), at=at)
        # A merge or a generalisation replaces its sources: they become fused into it, in the same commit.
        fused = fuse_sources(self.runtime, list(p.source.get("executors") or []), spec.name, at) if p.kind in FUSING_KINDS else []
        self.runtime.log.save(p, *fused)
        self.runtime.refresh()

    def _fail(self, p: Proposal, stage: str, reason: str) -> None:
        p.fail(stage=stage, reason=reason, at=self.runtime.clock())
        self._save(p)

    def _save(self, p: Proposal) -> None:
        self.runtime.log.save(p)
        self.runtime.proposals.catch_up(self.runtime.log)
