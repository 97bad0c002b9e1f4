"""The invariants of seeds/004 ch. 4 over random histories of turns and agers.

Random turns pass data along random chains of a small set of executors (some
at two versions, some calls to executors that do not exist), closed at
random intervals, with the ager run in between. After every step the
mnestome is checked: one mnest per key with the id derived from it, weight
in [0, 1], ts_last >= ts_first, uses >= 1, uses equal to the passings the
script made, and the fold agreeing with the aggregates exactly.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.mnest import mnest_id, mnest_key
from metnos.mechanisms.eventlog import EventLog
from metnos.runtime.mnestome import age, record_turn
from metnos.settings.workspace import Workspace
from projections.mnestome import MnestomeFold
from tests.support.mnest_turns import scripted_turn

T0 = datetime(2026, 1, 1, 9, tzinfo=timezone.utc)
EXECUTORS = [("read_files", "1.0.0"), ("read_files", "1.1.0"), ("extract_text", "2.0.0"), ("filter_lines", "1.0.0"),
             ("write_files", "1.0.0"), ("extract_invoice_number", None), ("send_summary", None)]

step = st.tuples(st.integers(0, len(EXECUTORS) - 1), st.sampled_from(["from_step", "template", "none"]))
turn_plan = st.tuples(st.floats(min_value=0.0, max_value=60.0), st.lists(step, min_size=1, max_size=4), st.booleans())


def _steps(plan: list[tuple[int, str]]) -> list:
    out = []
    for i, (which, how) in enumerate(plan):
        name, version = EXECUTORS[which]
        refs = [] if i == 0 or how == "none" else [(i, "path", how)]
        # Only a step that ran can feed another: refer back to the last real one.
        if refs and out[i - 1][1] is None:
            refs = []
        out.append((name, version, refs))
    return out


def _fold(log: EventLog) -> dict:
    fold = MnestomeFold()
    state = fold.initial()
    for nid, e in log.domain_events(1, topics=fold.topics):
        fold.apply(state, e, nid)
    return state


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(turn_plan, min_size=1, max_size=12))
def test_random_histories_keep_the_invariants(tmp_path_factory, plans) -> None:
    home: Path = tmp_path_factory.mktemp("mnest")
    log = EventLog(Workspace(home / "data", home / "config"), env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    expected_uses: dict[str, int] = {}
    last_use: dict[str, datetime] = {}
    now = T0
    for n, (gap, plan, run_ager) in enumerate(plans):
        now += timedelta(days=gap)
        steps = _steps(plan)
        turn, closed = scripted_turn(n, now, "archive the invoice", steps)
        for i, (name, version, refs) in enumerate(steps, start=1):
            for src, _field, _how in refs:
                s_name, s_ver, _ = steps[src - 1]
                key = mnest_key(s_name, s_ver, name, version)
                expected_uses[key] = expected_uses.get(key, 0) + 1
                last_use[key] = closed
        changed = record_turn(log, list(turn.pending_events), closed)
        log.save(turn, *changed)
        now = closed
        if run_ager:
            aged = age(log, now)
            log.save(*aged)
            assert age(log, now) == [], "a second ager run at the same date records nothing"

        state = _fold(log)
        mnests = state["mnests"]
        assert {m["key"] for m in mnests.values()} == set(expected_uses)
        assert len({m["key"] for m in mnests.values()}) == len(mnests)
        for mid, m in mnests.items():
            assert mid == str(mnest_id(m["src_executor"], m["src_version"], m["dst_executor"], m["dst_version"]))
            assert 0.0 <= m["weight"] <= 1.0
            assert m["ts_last"] >= m["ts_first"]
            assert m["uses"] >= 1
            if m["origin"] != "proto":
                assert m["uses"] == expected_uses[m["key"]]
                assert m["ts_last"] == last_use[m["key"]].isoformat()
            agg = log.repository.get(mnest_id(m["src_executor"], m["src_version"], m["dst_executor"], m["dst_version"]))
            assert agg.weight == m["weight"]
            assert agg.uses == m["uses"]
            assert agg.state == m["state"]
            assert agg.weight_at.isoformat() == m["weight_at"]
            if m["dst_version"] is None:
                assert m["desired_signature"]["name"] == m["dst_executor"]
