"""The nightly jobs of seeds/002 ch. 11.2 on a real workspace (LMDB log, signed seeds, the sandbox).

Each job fires as the scheduler fires it (its builtin schedule, run now on a
hand-moved clock); what it tells the user is read back from the outbox that
send_messages writes, and what it found from the log's events. The
introspection job drafts through a scripted model on a real HTTP server and
runs the birth tests in bubblewrap.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from domain.digest import digest_id
from domain.executor import Executor, executor_id
from domain.proposal import Proposal
from domain.schedule import builtin_schedule_id
from metnos.runtime.actors import pair
from metnos.runtime.booted import Runtime
from metnos.runtime.scheduler.clock import ManualClock
from metnos.runtime.scheduler.service import ScheduleService
from metnos.runtime.scheduler.tick import Scheduler
from metnos.runtime.synt.pipeline import run_id_of
from metnos.services import wiring
from metnos.settings.workspace import Workspace
from tests.integration.test_synt_generate import SPEC, draft
from tests.support.layouts import LAYOUTS
from tests.support.mnest_turns import scripted_turn
from tests.support.scripted_llm import ScriptedLLM, text

UTC = timezone.utc
# Days after `init`, so that nothing init recorded falls in a job's window.
NOW = datetime.now(UTC).replace(microsecond=0) + timedelta(days=100)


@pytest.fixture
def layout() -> str:
    return LAYOUTS[0]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def rt(home: Path, clock: ManualClock) -> Iterator[Runtime]:
    with Runtime.boot(Workspace.from_env(), birth=False, clock=clock) as runtime:
        ScheduleService(runtime).install_builtin_jobs()
        yield runtime


def fire(rt: Runtime, key: str, models: Any = None) -> dict[str, Any]:
    record = Scheduler(rt, models=models).run_now(str(builtin_schedule_id(key)))
    rt.refresh()
    return record


def outbox(rt: Runtime) -> list[str]:
    folder = rt.workspace.outbox_dir
    return [json.loads(p.read_text())["body"] for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def digests(rt: Runtime, job: str) -> list[Any]:
    return [e for e in rt.log.events.get(digest_id(job)) if type(e).__name__ == "DigestWritten"]


def proposal(rt: Runtime, n: int, *, request: str, opened: datetime, until: str, kind: str = "generate",
             source: dict | None = None, name: str = "compute_words") -> Proposal:
    """A proposal walked by its own domain commands up to ``until`` (a status), as the pipeline leaves it."""
    pid = rt.ids()
    p = Proposal.open(id=pid, kind=kind, request=request, source=source or {"kind": "user"}, run_id=run_id_of(pid), at=opened)
    at = opened
    if until != "requested":
        p.draft_spec(spec={**SPEC, "name": name}, tier="wise", model="scripted", at=(at := at + timedelta(minutes=1)))
    if until == "awaiting_code":
        p.approve_spec(by="user", at=(at := at + timedelta(minutes=1)))
        p.write_draft(round=0, files={"main.py": "x"}, capabilities={}, tier="wise", model="scripted", at=at)
        p.derive_profile(round=0, ok=True, capabilities={}, profile={}, problems=[], at=at)
        p.check_statically(round=0, ok=True, problems=[], at=at)
        p.record_birth(round=0, ok=True, cases=[{"name": "birth_counts_words", "ok": True, "error": None}], failure=None, at=at)
    assert p.status == until
    rt.log.save(p)
    return p


def status(rt: Runtime, p: Proposal) -> str:
    return rt.proposals.catch_up(rt.log)["proposals"][str(p.id)]["status"]


def test_every_job_is_installed_once_with_its_schedule_and_channel(rt: Runtime) -> None:
    rows = {r["target"]["key"]: r for r in ScheduleService(rt).list(owner="builtin")}
    expected = {"proposals_eta": "30 4 * * *", "promoter": "45 4 * * *", "introspection_apply": "30 5 * * *",
                "proposals_cleanup": "0 6 * * *", "lifecycle_summary": "30 6 * * *",
                "skill_sandbox_watchdog": "35 6 * * *", "promoter_digest": "0 7 * * *", "i18n_translate_pending": "0 2 * * *"}
    assert {k: rows[k]["cron"] for k in expected} == expected
    # The translations' night job drafts a bounded batch, and tells nobody (its drafts wait for review).
    assert (rows["i18n_translate_pending"]["args"], rows["i18n_translate_pending"]["channel"]) == ({"limit": 20}, "none")
    told = {k for k, r in rows.items() if r["channel"] == "outbox"}
    assert told == {"lifecycle_summary", "skill_sandbox_watchdog", "promoter_digest"}
    assert ScheduleService(rt).install_builtin_jobs() == []


def test_the_promoter_judges_each_draft_once_and_the_digest_tells_the_promoted(rt: Runtime) -> None:
    good = proposal(rt, 1, request="count the words", opened=NOW - timedelta(days=2), until="awaiting_code")
    orphan = proposal(rt, 2, request="merge two", opened=NOW - timedelta(days=2), until="awaiting_code", kind="merge",
                      source={"kind": "introspection", "executors": ["find_files", "gone_executor"], "evidence": {"uses": 12}},
                      name="find_and_gone")

    judged = fire(rt, "promoter")
    assert judged["ok"], judged
    verdicts = {e.originator_id: e for p in (good, orphan) for e in rt.log.events.get(p.id)
                if type(e).__name__ == "ProposalEvaluated"}
    assert verdicts[good.id].verdict == "promoted" and verdicts[good.id].killers == []
    assert verdicts[good.id].signals["birth_cases"] == 1 and verdicts[good.id].signals["age_days"] == 2
    assert verdicts[orphan.id].verdict == "held"
    assert verdicts[orphan.id].killers == ["sources_gone: gone_executor no longer in the catalogue"]
    assert status(rt, good) == "awaiting_code"  # the code gate stays the user's

    # The same drafts are not judged twice.
    fire(rt, "promoter")
    assert sum(type(e).__name__ == "ProposalEvaluated" for e in rt.log.events.get(good.id)) == 1

    fire(rt, "promoter_digest")
    told = outbox(rt)
    assert len(told) == 1 and good.run_id in told[0] and orphan.run_id not in told[0]
    assert "1 new executor(s)" in told[0] and f"metnos synt approve {good.run_id}" in told[0]
    written = digests(rt, "promoter_digest")
    assert [w["run_id"] for w in written[-1].figures["waiting"]] == [good.run_id] and told[0].endswith(written[-1].text)


def test_the_clean_up_closes_the_unanswered_and_the_duplicates_and_deletes_nothing(rt: Runtime) -> None:
    kept = proposal(rt, 1, request="count the words", opened=NOW - timedelta(days=2), until="awaiting_code")
    aged = proposal(rt, 2, request="tidy my files", opened=NOW - timedelta(days=40), until="awaiting_spec", name="tidy_files")
    twin = proposal(rt, 3, request="Count  the WORDS", opened=NOW - timedelta(days=1), until="requested")

    record = fire(rt, "proposals_cleanup")
    assert record["ok"], record
    assert (status(rt, kept), status(rt, aged), status(rt, twin)) == ("awaiting_code", "rejected", "rejected")
    reasons = {p.run_id: [e for e in rt.log.events.get(p.id)][-1] for p in (aged, twin)}
    assert reasons[aged.run_id].by == "proposals_cleanup" and "no answer in 30 days" in reasons[aged.run_id].reason
    assert f"duplicate of the older proposal {kept.run_id}" in reasons[twin.run_id].reason
    # Nothing deleted: every event of the closed ones is still there.
    assert [type(e).__name__ for e in rt.log.events.get(aged.id)] == ["ProposalOpened", "SpecificationDrafted", "ProposalRejected"]


def test_the_eta_aggregate_and_the_lifecycle_summary_read_the_log(rt: Runtime, clock: ManualClock) -> None:
    # Three answered turns on one path in the window (a scripted event every 10 ms: 60, 60 and 90 ms),
    # and one on another path eight days ago, outside it.
    pair = [("find_files", "1.0.0", []), ("sort_entries", "1.0.0", [(1, "entries", "from_step")])]
    for n, steps in enumerate((pair, pair, [*pair, ("sort_entries", "1.0.0", [(2, "entries", "from_step")])])):
        turn, _ = scripted_turn(n, NOW - timedelta(hours=n + 1), "find and sort", steps)
        rt.log.save(turn)
    old, _ = scripted_turn(9, NOW - timedelta(days=8), "read", [("read_files", "1.0.0", [])])
    rt.log.save(old)
    executor: Executor = rt.log.repository.get(executor_id("seed", "sort_entries"))
    executor.mark_below_threshold(version=executor.current, uses=0, window_days=30, at=NOW - timedelta(hours=2))
    rt.log.save(executor)
    rt.refresh()

    assert fire(rt, "proposals_eta")["ok"]
    shapes = digests(rt, "proposals_eta")[-1].figures["shapes"]
    assert shapes == {"find_files > sort_entries": {"turns": 3, "p50_ms": 60, "p95_ms": 90}}
    assert outbox(rt) == []  # the aggregate is recorded, not told

    assert fire(rt, "lifecycle_summary")["ok"]
    told = outbox(rt)
    assert len(told) == 1 and told[0].startswith("[lifecycle summary")
    assert told[0].endswith(": Lifecycle, last 24 h: executors: 1 below threshold (sort_entries)")
    assert digests(rt, "lifecycle_summary")[-1].figures["transitions"] == {
        "executors": {"below threshold": {"count": 1, "names": ["sort_entries"]}}}

    # A day later nothing changed: the figures are recorded, nothing is told.
    clock.advance(days=1)
    fire(rt, "lifecycle_summary")
    assert len(outbox(rt)) == 1
    assert digests(rt, "lifecycle_summary")[-1].figures["transitions"] == {}


def test_the_watchdog_tells_when_a_guest_can_talk_to_the_agent(rt: Runtime) -> None:
    fire(rt, "skill_sandbox_watchdog")
    assert outbox(rt) == []
    assert digests(rt, "skill_sandbox_watchdog")[-1].figures == {"skills": [], "guests": 0, "crossed": []}

    # The host's chat is no guest; the second chat paired is.
    assert pair(rt, "telegram", "1001") == "host"
    fire(rt, "skill_sandbox_watchdog")
    assert outbox(rt) == []
    pair(rt, "telegram", "2002")
    fire(rt, "skill_sandbox_watchdog")
    told = outbox(rt)
    assert len(told) == 1 and "A sandbox per skill is now advised: 1 paired guest(s)" in told[0]
    assert digests(rt, "skill_sandbox_watchdog")[-1].figures["guests"] == 1


def test_an_accepted_introspection_proposal_is_drafted_at_night_and_waits_at_the_code_gate(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = rt.ids()
    p = Proposal.open(id=pid, kind="specialise", request="count words", run_id=run_id_of(pid), at=NOW - timedelta(days=1),
                      source={"kind": "introspection", "key": "specialise:x", "executors": [], "evidence": {"uses": 31}})
    p.draft_spec(spec=SPEC, tier="wise", model="scripted", at=NOW - timedelta(days=1))
    rt.log.save(p)
    rt.refresh()
    # Not accepted yet: the job leaves it, and needs no model for that.
    assert fire(rt, "introspection_apply")["ok"]
    assert status(rt, p) == "awaiting_spec"

    p = rt.log.repository.get(p.id)
    p.approve_spec(by="user", at=NOW - timedelta(hours=1))
    rt.log.save(p)
    refused = fire(rt, "introspection_apply")
    assert not refused["ok"] and refused["kind"] == "NoModel"
    assert status(rt, p) == "drafting"

    with ScriptedLLM([text(draft())]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        record = fire(rt, "introspection_apply", models=wiring.llm_router(rt.workspace).for_tier)
    assert record["ok"], record
    assert len(llm.requests) == 1
    assert status(rt, p) == "awaiting_code"
    stages = [s["stage"] for s in rt.proposals.catch_up(rt.log)["proposals"][str(p.id)]["stages"]]
    assert stages[-1] == "birth tests"
