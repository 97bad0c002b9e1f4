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
MESSAGE_ARGUMENT: dict[str, int | str | tuple[int, ...]] = {
    "TurnError": 1, "PipingError": 1, "CatalogueError": 1, "RecordsError": 1, "ScratchpadError": 1,
    "UnknownVerbError": 1, "SchemaDefectError": 1, "RemediationError": 1,
    "ManifestError": 1, "RemoteRefused": 1, "ReplayedLLMError": 1, "ReplayedUnreachable": 1,
    "ProviderUnreachable": 1, "MalformedReply": 1, "ModelNotInstalled": 1, "HintError": 1,
    "CorruptRecord": 2, "SettingsError": 2, "_Refused": 1,
    # Why the sandbox cannot run, and what to do about it.
    "SandboxUnavailable": (0, 1), "SandboxSettingError": (0, 1),
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
_FIRING = "the scheduler's own bookkeeping of a firing: the tick opens and closes slots in order, a bug if broken"
_NEGATIVE = "days_between has refused a clock that runs backwards first (said: '{later} is before {earlier}'), a bug if reached"
NOT_SAID_SITES: dict[tuple[str, str], str] = {
    ("domain/schedule.py", "slot {slot} is still open (attempt {attempt})"): _FIRING,
    ("domain/schedule.py", "a new slot starts at attempt 1"): _FIRING,
    ("domain/schedule.py", "slot {slot} is not after the cursor {cursor}; it was served or passed already"): _FIRING,
    ("domain/schedule.py", "a slot has at most {MAX_ATTEMPTS} attempts"): _FIRING,
    ("domain/schedule.py", "no running attempt {attempt} for slot {slot}"): _FIRING,
    ("domain/schedule.py", "attempt {attempt} is the last one; it must be final"): _FIRING,
    ("domain/schedule.py", "a firing is still open"): _FIRING,
    ("domain/mnest_weight.py", "negative interval {dt_days} days"): _NEGATIVE,
    ("metnos/runtime/scheduler/clock.py", "a clock needs an aware datetime"):
        "ManualClock is made by tests and replays with an aware datetime, a bug otherwise",
}


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


def sample(shape: str) -> str:
    """A message the shape makes: each field filled with a value of its own."""
    from string import Formatter

    values = {name: f"v{n}" for n, name in enumerate(dict.fromkeys(n for _, n, _, _ in Formatter().parse(shape) if n))}
    return "".join(literal + (values[name] if name else "") for literal, name, _, _ in Formatter().parse(shape))


def test_every_message_a_person_reads_has_its_template(scanned) -> None:
    catalogue = i18n.load()
    sites = said_sites(scanned)
    assert len(sites) > 400
    unmatched = []
    for site in sites:
        found = i18n.error_template(sample(site.shape), catalogue)
        # The template found must be the one that makes this shape: another that happens to match says other words.
        if found is None or skeleton(catalogue.source[found[0]]) != skeleton(site.shape):
            unmatched.append(f"{site.where} {site.cls}: {site.shape!r} -> {found and found[0]}")
    assert unmatched == [], ("user-facing errors with no error.* template in metnos/settings/i18n/en.json (add one, its "
                             "Italian in it.json, or exclude the site in NOT_SAID_SITES with a reason):\n" + "\n".join(unmatched))


def test_the_excluded_sites_are_still_raised(scanned) -> None:
    sites, _ = scanned
    raised = {(s.path, s.shape) for s in sites}
    assert sorted(k for k in NOT_SAID_SITES if k not in raised) == []
    assert all(reason for reason in NOT_SAID_SITES.values())


# What a translation keeps as written: a command, a flag, a variable, a config section, a literal value.
KEPT = re.compile(r"`[^`]+`|(?<![\w-])--[a-z][a-z0-9-]*|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\[[a-z][a-z_.]*\]|\{\{.*?\}\}")


def test_every_error_template_is_in_italian_with_its_fields_commands_and_flags() -> None:
    catalogue = i18n.load()
    errors = {k: t for k, t in catalogue.source.items() if k.startswith(i18n.ERROR)}
    assert len(errors) > 380
    for key, english in errors.items():
        italian = catalogue.fresh(key, "it")
        assert italian is not None, key
        assert i18n.fields_of(italian) == i18n.fields_of(english), key
        missing = [kept for kept in KEPT.findall(english) if kept not in italian]
        assert missing == [], (key, missing)


def test_the_templates_are_matched_in_well_under_a_millisecond(scanned) -> None:
    catalogue = i18n.load()
    messages = [sample(s.shape) for s in said_sites(scanned)] + ["something no template makes"] * 50
    i18n.error_template(messages[0], catalogue)  # the patterns are compiled once per catalogue
    started = time.perf_counter()
    for message in messages:
        i18n.error_template(message, catalogue)
    mean = (time.perf_counter() - started) / len(messages)
    # Measured 8 to 40 µs a message, matched or not (2 busy cores, Python 3.11); the bound leaves room for a loaded machine.
    assert mean < 0.001, f"{mean * 1e6:.0f} µs a message"


def test_a_field_that_is_a_message_of_its_own_is_said_too(monkeypatch) -> None:
    monkeypatch.setenv("METNOS_LANGUAGE", "it")
    from metnos.settings.errors import SettingsError

    message = str(SettingsError("METNOS_TURN_MAX_STEPS", "many", "must be a number"))
    assert message == "METNOS_TURN_MAX_STEPS='many' is invalid: must be a number"
    assert i18n.said_error(message) == "METNOS_TURN_MAX_STEPS='many' non è valido: deve essere un numero"
    assert i18n.said_error(message, "en") == message
