"""Seed mnests planted at the mnestome's first boot (seeds/004 ch. 6), on a real workspace."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from domain import mnest_weight as mw
from domain.mnest import Mnest
from metnos.adapters.cli import main
from metnos.mechanisms.eventlog import EventLog
from metnos.runtime.booted import Runtime
from metnos.settings.workspace import Workspace
from tests.support.seed_mnests import EXPECTED_SEED_PAIRS, SEED_VERSION


@pytest.fixture
def saves(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The aggregate classes of every ``EventLog.save`` call, one list per call (one call, one transaction)."""
    calls: list[list[str]] = []
    original = EventLog.save

    def spy(self, *objs, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append([type(o).__name__ for o in objs])
        return original(self, *objs, **kwargs)

    monkeypatch.setattr(EventLog, "save", spy)
    return calls


@pytest.fixture
def user_home(metnos_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def mnestome_state() -> dict:
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        return rt.mnestome.catch_up(rt.log)


def head() -> int:
    log = EventLog(Workspace.from_env())
    try:
        return log.recorder.max_notification_id() or 0
    finally:
        log.close()


def mnest_notifications() -> list[tuple[int, str]]:
    log = EventLog(Workspace.from_env())
    try:
        return [(n.id, n.topic.rsplit(".", 1)[-1]) for n in log.notifications() if ":Mnest." in n.topic]
    finally:
        log.close()


def test_init_plants_the_seed_mnests_in_one_transaction(user_home, saves, capsys) -> None:
    assert main(["init"]) == 0
    out = capsys.readouterr().out
    assert f"mnestome:  {len(EXPECTED_SEED_PAIRS)} seed mnests at weight 0.30\n" in out

    with_mnests = [call for call in saves if "Mnest" in call]
    assert with_mnests == [["Mnest"] * len(EXPECTED_SEED_PAIRS)]

    # Together in the log: one run of notification ids, nothing else inside it.
    created = mnest_notifications()
    ids = [nid for nid, _ in created]
    assert len(created) == len(EXPECTED_SEED_PAIRS)
    assert {kind for _, kind in created} == {"MnestCreated"}
    assert ids == list(range(ids[0], ids[0] + len(ids)))

    state = mnestome_state()
    mnests = list(state["mnests"].values())
    assert {(m["src_executor"], m["dst_executor"]) for m in mnests} == EXPECTED_SEED_PAIRS
    assert len(mnests) == len(EXPECTED_SEED_PAIRS)
    for m in mnests:
        assert m["weight"] == mw.BOOTSTRAP_WEIGHT == 0.30
        assert m["state"] == "active" and m["origin"] == "seed"
        assert m["src_version"] == m["dst_version"] == SEED_VERSION
        assert m["tags"] == [] and m["decay_lambda"] == mw.DEFAULT_LAMBDA
        assert m["uses"] == 1
    # One boot, one clock reading.
    assert len({m["weight_at"] for m in mnests}) == 1


def test_a_second_boot_plants_nothing(user_home, capsys) -> None:
    assert main(["init"]) == 0
    before = head()
    capsys.readouterr()
    assert main(["init"]) == 0
    n = len(EXPECTED_SEED_PAIRS)
    assert f"mnestome:  {n} live mnests ({n} seed mnests, planted at its first boot)\n" in capsys.readouterr().out
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        assert rt.seed_mnests_planted == 0
    assert head() == before


def test_list_rebuild_and_ager_see_the_seed_mnests(user_home, capsys) -> None:
    assert main(["init"]) == 0
    capsys.readouterr()

    assert main(["mnestome", "list", "--json", "--limit", "100"]) == 0
    rows = orjson.loads(capsys.readouterr().out)
    assert {(r["src_executor"], r["dst_executor"]) for r in rows} == EXPECTED_SEED_PAIRS
    assert len(rows) == len(EXPECTED_SEED_PAIRS)
    assert main(["mnestome", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 1 + 20
    assert all(line.startswith("0.300      1  active     ") for line in listed[1:])

    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        before = rt.mnestome.state_bytes()
    assert main(["rebuild", "mnestome"]) == 0
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        assert rt.mnestome.state_bytes() == before
        planted_at = datetime.fromisoformat(next(iter(rt.mnestome.state()["mnests"].values()))["weight_at"])
    capsys.readouterr()

    # 30 idle days: 0.30 * e^(-0.018 * 30) = 0.175, under the decay threshold 0.20.
    later = planted_at + timedelta(days=30)
    assert main(["mnestome", "age", "--at", later.isoformat(), "--json"]) == 0
    aged = orjson.loads(capsys.readouterr().out)
    assert aged["events"] == {"MnestDecayed": len(EXPECTED_SEED_PAIRS), "MnestDemoted": len(EXPECTED_SEED_PAIRS)}
    state = mnestome_state()
    expected = 0.30 * math.exp(-0.018 * 30)
    assert round(expected, 3) == 0.175
    for m in state["mnests"].values():
        assert m["state"] == "decaying"
        assert m["weight"] == pytest.approx(expected, abs=1e-12)
    # 22 days would not have been enough: the threshold is crossed at ln(1.5)/0.018 = 22.5 days.
    assert 0.30 * math.exp(-0.018 * 22) > mw.DECAY_WEIGHT > 0.30 * math.exp(-0.018 * 23)


def _workspace_without_seed_mnests(monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace as made before seed mnests existed: executors active, mnestome empty."""
    import metnos.runtime.booted

    with monkeypatch.context() as patched:
        patched.setattr(metnos.runtime.booted, "plant_seed_mnests", lambda runtime: 0)
        assert main(["init"]) == 0
    assert mnest_notifications() == []


def test_an_older_workspace_gets_them_at_its_next_boot_but_not_over_an_observed_pair(user_home, monkeypatch) -> None:
    _workspace_without_seed_mnests(monkeypatch)
    at = datetime.fromisoformat("2026-01-05T10:00:00+00:00")
    log = EventLog(Workspace.from_env())
    try:
        # One pair observed at today's versions, one at an older version of its source.
        log.save(Mnest.observe(src="find_files", src_version="1.0.0", dst="filter_entries", dst_version="1.0.0",
                               uses=2, at=at, tags=["photo"]),
                 Mnest.observe(src="read_files", src_version="0.9.0", dst="sort_entries", dst_version="1.0.0",
                               uses=1, at=at, tags=[]))
    finally:
        log.close()

    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        assert rt.seed_mnests_planted == len(EXPECTED_SEED_PAIRS) - 2
        state = rt.mnestome.catch_up(rt.log)
    by_pair = {(m["src_executor"], m["dst_executor"]): m for m in state["mnests"].values()}
    assert set(by_pair) == EXPECTED_SEED_PAIRS
    assert len(state["mnests"]) == len(EXPECTED_SEED_PAIRS)
    kept = by_pair[("find_files", "filter_entries")]
    assert kept["origin"] == "observed" and kept["uses"] == 2 and kept["tags"] == ["photo"]
    older = by_pair[("read_files", "sort_entries")]
    assert older["origin"] == "observed" and older["src_version"] == "0.9.0"
    assert sum(m["origin"] == "seed" for m in state["mnests"].values()) == len(EXPECTED_SEED_PAIRS) - 2


def test_a_key_already_in_the_log_is_never_planted_twice(user_home, monkeypatch) -> None:
    """Even a mnestome view that lags the log cannot make a second mnest for a tuple."""
    import metnos.runtime.booted
    from metnos.runtime.mnestome.bootstrap import active_seed_executors, seed_mnests

    _workspace_without_seed_mnests(monkeypatch)
    log = EventLog(Workspace.from_env())
    try:
        log.save(Mnest.observe(src="sort_entries", src_version="1.0.0", dst="describe_entries", dst_version="1.0.0",
                               uses=1, at=datetime.fromisoformat("2026-01-05T10:00:00+00:00"), tags=[]))
    finally:
        log.close()
    monkeypatch.setattr(metnos.runtime.booted, "plant_seed_mnests", lambda runtime: 0)
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        lagging = SimpleNamespace(log=rt.log, mnestome=SimpleNamespace(catch_up=lambda log: {"mnests": {}}))
        planted = seed_mnests(lagging, active_seed_executors(rt), rt.clock())
    assert len(planted) == len(EXPECTED_SEED_PAIRS) - 1
    assert ("sort_entries", "describe_entries") not in {(m.src_executor, m.dst_executor) for m in planted}


def test_any_seed_mnest_in_the_log_means_the_first_boot_is_behind(user_home, monkeypatch) -> None:
    _workspace_without_seed_mnests(monkeypatch)
    log = EventLog(Workspace.from_env())
    try:
        log.save(Mnest.seed(src="get_urls", src_version="1.0.0", dst="describe_entries", dst_version="1.0.0",
                            at=datetime.fromisoformat("2026-01-05T10:00:00+00:00"), tags=[]))
    finally:
        log.close()
    before = head()
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        assert rt.seed_mnests_planted == 0
        assert len(rt.mnestome.state()["mnests"]) == 1
    assert head() == before


def _ask(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text_: str) -> dict:
    from tests.support.scripted_llm import ScriptedLLM, call, text

    script = [call("find_files", {"base_path": "~/docs", "pattern": "*.md"}), call("describe_entries", {"from_step": 1}), text("a.md")]
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        assert main(["ask", text_, "--json"]) == 0
        return orjson.loads(capsys.readouterr().out)


def _ranking(capsys: pytest.CaptureFixture[str], turn_id: str) -> dict:
    capsys.readouterr()
    assert main(["events", "--json", "--aggregate", turn_id]) == 0
    events = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    return next(e["state"]["ranking"] for e in events if e["topic"].endswith("PrefilterRanked"))


def test_turns_from_before_and_after_the_planting_replay_clean(user_home, monkeypatch, capsys) -> None:
    (user_home / "docs").mkdir()
    (user_home / "docs" / "a.md").write_text("a")
    # The request names both steps so the pool holds the pair the first turn walks ("find the markdown
    # files" alone is offered find_files and find_urls).
    request = "find the markdown files in docs and describe them"
    import metnos.runtime.booted

    _workspace_without_seed_mnests(monkeypatch)
    with monkeypatch.context() as patched:
        patched.setattr(metnos.runtime.booted, "plant_seed_mnests", lambda runtime: 0)
        before = _ask(monkeypatch, capsys, request)
    assert "mnest" not in _ranking(capsys, before["turn_id"])

    # The next boot (this ask's) plants them; the pair the first turn walked keeps its observed mnest.
    after = _ask(monkeypatch, capsys, request)
    state = mnestome_state()
    seeds = {m["id"]: m for m in state["mnests"].values() if m["origin"] == "seed"}
    assert len(seeds) == len(EXPECTED_SEED_PAIRS) - 1
    # find_files's seed mnests reach eight executors the words did not match;
    # a prior that cannot tell them apart adds none of them to the pool.
    ranking = _ranking(capsys, after["turn_id"])
    assert "find_files" in [c["name"] for c in ranking["candidates"]]
    assert [c["name"] for c in ranking["candidates"] if c.get("via") == "mnest"] == []
    assert "mnest" not in ranking

    capsys.readouterr()
    assert main(["replay", "--all"]) == 0


def test_a_seed_mnest_never_brings_an_unrelated_executor_into_the_pool(user_home, monkeypatch, capsys) -> None:
    from tests.support.scripted_llm import ScriptedLLM, call, text

    assert main(["init"]) == 0
    # "time" matches filter_lists (its temporal overlap), a producer whose seed
    # mnests reach every consumer of lists; none of them belongs in this pool. The rules' ranking is the
    # premise: the learned offer leaves filter_lists out of it before the mnests are asked.
    monkeypatch.setenv("METNOS_ENGINE_OFFER", "shortlist")
    with ScriptedLLM([call("get_now", {}), text("it is now")]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        assert main(["ask", "What time is it now?", "--json"]) == 0
        turn = orjson.loads(capsys.readouterr().out)
    ranking = _ranking(capsys, turn["turn_id"])
    names = [c["name"] for c in ranking["candidates"]]
    assert names[0] == "get_now"
    assert "filter_lists" in names
    assert [c["name"] for c in ranking["candidates"] if c.get("via") == "mnest"] == []
    assert "delete_files" not in names
    # Nothing matched by the words is a seed destination left to reorder.
    assert "mnest" not in ranking
