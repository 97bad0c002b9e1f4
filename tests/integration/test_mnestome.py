"""The mnestome on a real LMDB log: the flow of seeds/004 ch. 9 from scripted
turns, the ager, a proto-mnest's executor being born, snapshots, rebuilds,
and the CLI on an initialised workspace."""

from __future__ import annotations

import os
import shutil

from datetime import datetime, timedelta, timezone

import orjson
import pytest

from domain import mnest_weight as mw
from domain.mnest import mnest_id
from metnos.mechanisms.eventlog import EventLog
from metnos.runtime.mnestome import age, compose, record_turn
from metnos.runtime.mnestome.snapshot import read_snapshot, write_snapshot
from metnos.settings.workspace import Workspace
from projections.base import MaterialisedView
from projections.mnestome import MnestomeFold, top
from metnos.mechanisms.store.views import ViewStore
from tests.support.mnest_turns import scripted_turn
from tests.support.seed_mnests import EXPECTED_SEED_PAIRS

T0 = datetime(2026, 3, 12, 9, tzinfo=timezone.utc)
TEXT = "archive the PDF invoice"
FS, PDF, CLS, SAVE = ("fs_read", "1.0.0"), ("pdf_extract", "2.0.0"), ("invoice_classify", "1.0.0"), ("workspace_save", "1.0.0")
FULL = [(*FS, []), (*PDF, [(1, "path", "template")]), (*CLS, [(2, "text", "template")]), (*SAVE, [(3, "label", "from_step")])]
TO_PDF = [(*FS, []), (*PDF, [(1, "path", "template")])]
PROTO = [(*FS, []), (*PDF, [(1, "path", "template")]), ("extract_invoice_number", None, [(2, "text", "template")])]
CLS_SAVE = [(*CLS, []), (*SAVE, [(1, "label", "from_step")])]
# The ager runs 53.75 days after the first turn: the gaps before it give the
# weights of the example (e^(-0.018 g) from a saturated 1.0).
AGED = T0 + timedelta(days=53.75)


def day(d: float) -> datetime:
    return T0 + timedelta(days=d)


def script() -> list[tuple[datetime, list]]:
    """47 fs_read->pdf_extract, 41 pdf_extract->invoice_classify, 44 invoice_classify->workspace_save, 4 protos."""
    turns = [(day(d), FULL) for d in range(41)]
    turns += [(day(d + 0.5), PROTO) for d in (6, 16, 26, 36)]
    turns += [(day(d), CLS_SAVE) for d in (41, 41.5, 53.75 - 11.7)]
    turns += [(day(d), TO_PDF) for d in (42.5, 53.75 - 9.0)]
    return sorted(turns, key=lambda t: t[0])


def run(log: EventLog, turns: list[tuple[datetime, list]], first: int = 0) -> None:
    for n, (when, steps) in enumerate(turns, start=first):
        turn, closed = scripted_turn(n, when, TEXT, steps)
        log.save(turn, *record_turn(log, list(turn.pending_events), closed))


@pytest.fixture
def world(metnos_home):
    ws = Workspace.from_env()
    log = EventLog(ws)
    store = ViewStore.open(ws.views_dir, "mnestome")
    view = MaterialisedView(MnestomeFold(), store)
    try:
        yield ws, log, view
    finally:
        store.close()
        log.close()


def test_the_invoice_flow_of_seeds_004_ch9(world) -> None:
    ws, log, view = world
    run(log, script())
    log.save(*age(log, AGED))
    state = view.catch_up(log)
    rows = top(state, 10)
    got = [(m["src_executor"], m["dst_executor"], round(m["weight"], 2), m["uses"], m["state"]) for m in rows]
    assert got == [
        ("fs_read", "pdf_extract", 0.85, 47, "active"),
        ("invoice_classify", "workspace_save", 0.81, 44, "active"),
        ("pdf_extract", "invoice_classify", 0.78, 41, "active"),
        ("pdf_extract", "extract_invoice_number", 0.34, 4, "proto"),
    ]
    proto = rows[3]
    assert proto["dst_version"] is None
    assert proto["desired_signature"]["name"] == "extract_invoice_number"
    assert proto["desired_signature"]["inputs"] == ["arg_text <- pdf_extract.text"]
    assert all("invoice" in m["tags"] for m in rows)
    assert rows[0]["ts_first"] == day(0).isoformat()[:19] + rows[0]["ts_first"][19:]
    # No chain of existing executors spells extract_invoice_number: the synt would have to generate it.
    assert compose(state, proto["desired_signature"], start="pdf_extract") is None

    # The executor is born and used: the proto's history goes on in an active mnest.
    born = day(60)
    run(log, [(born, [(*FS, []), (*PDF, [(1, "path", "template")]), ("extract_invoice_number", "1.0.0", [(2, "text", "template")])])], first=1000)
    state = view.catch_up(log)
    realised = state["mnests"][str(mnest_id("pdf_extract", "2.0.0", "extract_invoice_number", "1.0.0"))]
    old = state["mnests"][proto["id"]]
    assert realised["state"] == "active" and realised["origin"] == "proto"
    assert realised["uses"] == 5
    assert realised["ts_first"] == proto["ts_first"]
    expected = mw.reinforced(proto["weight"], mw.days_between(datetime.fromisoformat(proto["weight_at"]), datetime.fromisoformat(realised["weight_at"])), mw.DEFAULT_LAMBDA, 1)
    assert realised["weight"] == expected
    assert old["state"] == "superseded" and old["superseded_by"] == realised["id"]

    # A hundred quiet days later the chain is decaying, the superseded proto archived.
    later = day(160)
    log.save(*age(log, later))
    state = view.catch_up(log)
    by_pair = {(m["src_executor"], m["dst_executor"]): m for m in state["mnests"].values()}
    assert by_pair[("fs_read", "pdf_extract")]["state"] == "decaying"
    assert by_pair[("pdf_extract", "extract_invoice_number")]["state"] in ("decaying", "archived")
    assert state["mnests"][proto["id"]]["state"] == "archived"
    assert age(log, later) == []
    # Still used? Resumed use brings a decaying mnest back.
    run(log, [(day(161), TO_PDF)], first=2000)
    assert view.catch_up(log)["mnests"][rows[0]["id"]]["state"] == "active"

    # Rebuilt from the log, the view is the same, byte for byte.
    live = view.state_bytes()
    view.rebuild(log)
    assert view.state_bytes() == live

    snap = write_snapshot(live, ws.data_dir, later, position=view.position)
    assert snap is not None and snap.name == "mnestome-2026-08.json.zst"
    assert write_snapshot(live, ws.data_dir, later) is None, "one snapshot a month"
    header, snapped = read_snapshot(snap)
    assert header["position"] == view.position
    assert orjson.dumps(snapped, option=orjson.OPT_SORT_KEYS) == live


def test_proto_mnests_fade_and_are_purged(world) -> None:
    _, log, view = world
    run(log, [(day(0), PROTO)])
    # 0.15 e^(-0.018 d) < 0.05 after ln(3)/0.018 = 61 days.
    first = age(log, day(60))
    # A mnest used once weighs 0.15, already under the decay threshold: the first ager run demotes it.
    assert sorted(type(e).__name__ for m in first for e in m.pending_events) == ["MnestDecayed", "MnestDecayed", "MnestDemoted"]
    log.save(*first)
    assert view.catch_up(log)["mnests"][str(mnest_id("pdf_extract", "2.0.0", "extract_invoice_number", None))]["state"] == "proto"
    changed = age(log, day(62))
    kinds = sorted(type(e).__name__ for m in changed for e in m.pending_events)
    assert kinds == ["MnestDecayed", "ProtoMnestPurged"]
    log.save(*changed)
    state = view.catch_up(log)
    assert state["mnests"][str(mnest_id("pdf_extract", "2.0.0", "extract_invoice_number", None))]["state"] == "purged"
    assert top(state, 10)[0]["state"] == "decaying"


def test_a_new_version_supersedes_the_old_mnest(world) -> None:
    _, log, view = world
    run(log, [(day(0), TO_PDF)])
    run(log, [(day(1), [(*FS, []), ("pdf_extract", "2.1.0", [(1, "path", "from_step")])])], first=1)
    state = view.catch_up(log)
    old = state["mnests"][str(mnest_id("fs_read", "1.0.0", "pdf_extract", "2.0.0"))]
    new = state["mnests"][str(mnest_id("fs_read", "1.0.0", "pdf_extract", "2.1.0"))]
    assert old["state"] == "superseded" and old["superseded_by"] == new["id"]
    assert new["state"] == "active" and new["uses"] == 1


def test_cli_and_runtime_on_an_initialised_workspace(metnos_home, tmp_path, monkeypatch, capsys) -> None:
    from metnos.adapters.cli import main
    from metnos.runtime.booted import Runtime

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    assert main(["init"]) == 0
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        assert "mnestome" in rt.projections()
        for n, (when, steps) in enumerate(script()[:12]):
            turn, closed = scripted_turn(n, when, TEXT, steps)
            # The runtime path: the mnestome view gives the state for supersession.
            rt.log.save(turn, *record_turn(rt, list(turn.pending_events), closed))
        rt.refresh()
        live = rt.mnestome.state_bytes()
        # The four mnests of the invoice flow, next to the seed mnests init planted.
        mnests = orjson.loads(live)["mnests"].values()
        assert len(mnests) == 4 + len(EXPECTED_SEED_PAIRS)
        assert sum(m["origin"] == "seed" for m in mnests) == len(EXPECTED_SEED_PAIRS)

    capsys.readouterr()
    assert main(["mnestome", "list", "--json", "--tag", "invoice"]) == 0
    rows = orjson.loads(capsys.readouterr().out)
    assert [r["dst_executor"] for r in rows][:1] == ["pdf_extract"]
    assert main(["mnestome", "list", "--tag", "holiday"]) == 0
    assert "no mnests tagged 'holiday'" in capsys.readouterr().out
    assert main(["mnestome", "list", "--state", "bogus"]) == 2
    assert "unknown mnest state bogus" in capsys.readouterr().err

    assert main(["mnestome", "show", "fs_read", "pdf_extract@2.0.0", "--json"]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert len(shown) == 1 and shown[0]["uses"] == 12
    history = shown[0]["history"]
    assert [h["event"] for h in history] == ["MnestCreated"] + ["MnestReinforced"] * 11
    assert history[-1]["weight"] == shown[0]["weight"]
    assert main(["mnestome", "show", "fs_read", "nothing_here"]) == 2
    assert "no mnest from fs_read to nothing_here" in capsys.readouterr().err

    out = tmp_path / "g.dot"
    assert main(["mnestome", "graph", "--out", str(out)]) == 0
    dot = out.read_text()
    assert dot.startswith("digraph mnestome {")
    assert '"fs_read" -> "pdf_extract"' in dot and '"extract_invoice_number" [style=dashed];' in dot
    if shutil.which("dot"):
        png = out.with_suffix(".png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 500
    elif os.environ.get("METNOS_REQUIRE_GRAPHVIZ"):
        pytest.fail("METNOS_REQUIRE_GRAPHVIZ is set but Graphviz's dot is not installed")

    assert main(["mnestome", "age", "--at", "not-a-date"]) == 2
    assert "is not an ISO date" in capsys.readouterr().err
    assert main(["mnestome", "age", "--at", "2026-09-01", "--json"]) == 0
    aged = orjson.loads(capsys.readouterr().out)
    assert aged["events"]["MnestDemoted"] == 3 and aged["events"]["MnestDecayed"] == 4
    assert aged["snapshot"].endswith("mnestome-2026-09.json.zst")

    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        before = rt.mnestome.state_bytes()
    assert main(["rebuild", "mnestome"]) == 0
    with Runtime.boot(Workspace.from_env(), birth=False) as rt:
        assert rt.mnestome.state_bytes() == before
