"""Every error a person can read at the command line has its ``error.*`` template, with its Italian.

An error is raised in English (the log, the tests and the daemon's API keep those words); the CLI says
it in the command's language by the template that makes the message (metnos/settings/i18n,
``said_error``). The raise sites are read from the source (tests/support/error_sites.py): a user-facing
message added without its template fails here, named by file and line. Which errors are user-facing is
decided per class below, each exclusion with its reason (docs/languages.md).
"""

from __future__ import annotations

import re
import time

import pytest

from metnos.settings import i18n
from tests.support.error_sites import Site, descends, has_words, scan, skeleton

# The argument that carries the message, for the classes whose constructor does not take it first. A
# fragment (a reason, a fix) has its own template, said inside the one its class's __init__ makes.
MESSAGE_ARGUMENT: dict[str, int | str] = {
    "TurnError": 1, "PipingError": 1, "CatalogueError": 1, "RecordsError": 1, "ScratchpadError": 1,
    "UnknownVerbError": 1, "SchemaDefectError": 1, "RemediationError": 1,
    "ManifestError": 1, "RemoteRefused": 1, "ReplayedLLMError": 1, "ReplayedUnreachable": 1,
    "ProviderUnreachable": 1, "MalformedReply": 1, "ModelNotInstalled": 1, "HintError": 1,
    "CorruptRecord": 2, "SettingsError": 2, "_Refused": 1,
}

# Errors that reach the command line although they are not MetnosErrors: the log's own (the CLI prints a
# PersistenceError as one line), and those a MetnosError carries whole (``raise SchedulerError(str(e))``).
CARRIED = {
    "LogUnavailable": "the log's own: the CLI prints it as one line",
    "LogDamaged": "the log's own: the CLI prints it as one line",
    "BadLogSetting": "the log's own: the CLI prints it as one line",
    "LogFromNewerVersion": "the log's own: the CLI prints it as one line",
    "CorruptRecord": "the log's own: the CLI prints it as one line",
    "ScheduleError": "SchedulerService raises it again as a SchedulerError",
    "ProposalError": "SyntPipeline raises it again as a SyntError",
    "LifecycleError": "skills import raises it again as a MetnosError",
    "KeyFileError": "raised again as NotInitialised / MetnosError, `run metnos init` added",
    "SigningError": "executors sign and skills import raise it again as a MetnosError",
    "PinError": "mcp add raises it again as McpRefused",
    "DeriveError": "mcp add raises it again as McpRefused",
    "TimeRunsBackwards": "the mnestome raises it again inside a MnestomeError",
}

# Errors no person reads at the command line, each with why: said elsewhere, in another's words, or a bug.
NOT_SAID = {
    # A step's structured refusal: handed to the model as the step's observation and recorded; how the
    # turn ended is said by the failure.* texts.
    "TurnError": "a step's refusal, for the model", "PipingError": "a step's refusal, for the model",
    "CatalogueError": "a step's refusal, for the model (and the catalogue's own, raised while the catalogue "
                      "that would say it cannot be read)",
    "RecordsError": "a step's refusal, for the model", "ScratchpadError": "a step's refusal, for the model",
    "UnknownVerbError": "a step's refusal, for the model", "SchemaDefectError": "a step's refusal, for the model",
    "RemediationError": "a step's refusal, for the model",
    # An executor call's outcome: recorded and given to the model (SandboxUnavailable, a MetnosError, is said).
    "InvocationError": "an executor call's outcome, for the model", "PolicyViolation": "an executor call's outcome, for the model",
    "SchemaViolation": "an executor call's outcome, for the model", "NetworkDenied": "an executor call's outcome, for the model",
    # synt's findings on the model's drafts: recorded in the proposal, read in `synt show` (a report: English).
    "SpecProblem": "synt's finding on a draft, kept in the proposal", "DraftProblem": "synt's finding on a draft, kept in the proposal",
    "SchemaProblem": "synt's finding on a draft, kept in the proposal",
    "ManifestError": "a manifest's defect: synt keeps it in the proposal, the catalogue skips the executor",
    # The turn's control flow: caught and turned into how the turn ends.
    "EndTurn": "control flow of a turn", "AnswerFromData": "control flow of a turn", "PlanFailed": "control flow of a turn",
    "NotACall": "control flow of a turn", "Interrupted": "said by the CLI's cli.stopped text",
    # Private to one module: caught where raised.
    "_Cut": "caught where raised", "_TooSlow": "caught where raised", "_Garbled": "caught where raised",
    "_Refused": "caught where raised: the firing's recorded verdict",
    "_BadRequest": "the egress proxy's HTTP answer to a sandboxed executor",
    "BodyTooLarge": "the daemon's HTTP answer (413)",
    "NotCapturable": "caught where raised: the file is not captured for undo",
    "NotGGUF": "caught where raised: the model file is taken as absent",
    "LegacySignature": "caught where raised", "HintError": "caught where raised: the hint is skipped and logged",
    "LandlockError": "caught where raised: the sandbox says SandboxUnavailable",
    "SeccompUnavailable": "caught where raised: the sandbox says SandboxUnavailable",
    "ReplayExhausted": "a replay's divergence, reported by `metnos replay` as data",
    # A programming error: no person can cause it.
    "ClockNotInjected": "a bug: the clock was not given", "MnestError": "an invariant of a mnest: a bug if broken",
    # Defined outside metnos/ by executors, which run sandboxed and answer the model.
    "Refused": "an executor's, for the model", "FetchError": "an executor's, for the model",
}

# Messages of user-facing classes that are not said in the user's words, by (file, English shape): internal
# invariants a person cannot cause. Reviewed: each must still exist (a stale entry fails).
NOT_SAID_SITES: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def scanned() -> tuple[list[Site], dict[str, set[str]]]:
    return scan(MESSAGE_ARGUMENT)


def user_facing(site: Site, classes: dict[str, set[str]]) -> bool:
    return (site.cls in CARRIED or descends(site.cls, "MetnosError", classes)) and (site.path, site.shape) not in NOT_SAID_SITES


def said_sites(scanned: tuple[list[Site], dict[str, set[str]]]) -> list[Site]:
    sites, classes = scanned
    return [s for s in sites if user_facing(s, classes) and has_words(s.shape)]


def test_every_exception_class_is_decided_said_or_not(scanned) -> None:
    _, classes = scanned
    undecided = sorted(c for c in classes if not descends(c, "MetnosError", classes) and c not in CARRIED and c not in NOT_SAID)
    assert undecided == [], f"exception classes neither said (MetnosError, CARRIED) nor excluded with a reason (NOT_SAID): {undecided}"
    both = sorted(c for c in NOT_SAID if c in CARRIED or descends(c, "MetnosError", classes))
    assert both == [], both
