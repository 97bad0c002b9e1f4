"""The introspective cascade in the maintenance, and Fused made real: kept while cited,
archived when not, defused back. Real log, real sandbox, scripted model, both layouts."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

from domain.invocation import Invocation
from domain.canonical import canonical_hash
from metnos.adapters.cli import main
from metnos.runtime.booted import Runtime
from metnos.runtime.scheduler.callbacks import CallbackContext
from metnos.runtime.scheduler.maintenance import run_synt_introspect
from metnos.runtime.synt.introspect import MERGE_USES, MERGE_WEIGHT
from metnos.runtime.synt.pipeline import Synt
from metnos.settings.workspace import Workspace
from tests.integration.test_synt_generate import _generate, draft, spec_reply
from tests.support.scripted_llm import ScriptedLLM, call, text


def _introspect() -> dict:
    with Runtime.boot(birth=False) as rt:
        result = run_synt_introspect(CallbackContext(runtime=rt, now=rt.clock(), schedule_id="test"), {})
        rt.log.save(*result.aggregates)
    return result.output


def _proposals(capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["synt", "list", "--json"]) == 0
    return orjson.loads(capsys.readouterr().out)["proposals"]


def _states(capsys) -> dict[str, str]:
    capsys.readouterr()
    assert main(["executors", "list", "--json"]) == 0
    return {r["name"]: r["state"] for r in orjson.loads(capsys.readouterr().out) if r["current"] or r["state"] != "active"}


def test_a_frequent_argument_binding_becomes_one_specialise_proposal_with_its_evidence(home: Path, capsys) -> None:
    with Runtime.boot(birth=False) as rt:
        calls = []
        for i in range(30):
            args = {"timezone": "Europe/Rome" if i % 10 else "UTC"}
            calls.append(Invocation.request(id=rt.ids(), at=rt.clock(), executor="get_now", version="1.0.0", origin="seed",
                                            digest="blake3:x", args=args, args_hash=canonical_hash(args),
                                            caller={"kind": "test"}, turn_id=None, trace_id=f"t{i}"))
        rt.log.save(*calls)
    first = _introspect()
    assert len(first["proposals"]) == 1
    [p] = _proposals(capsys)
    assert p["kind"] == "specialise" and p["status"] == "requested"
    assert p["source"]["evidence"] == {"calls": 30, "argument": "timezone", "value": '"Europe/Rome"', "with_value": 27,
                                       "dominance": 0.9, "window_days": 14}
    # The same evidence the next night proposes nothing new.
    assert _introspect()["proposals"] == []
    assert len(_proposals(capsys)) == 1


def test_a_merge_fuses_its_sources_kept_while_cited_archived_when_not_and_defused(home: Path, capsys, monkeypatch) -> None:
    with Runtime.boot(birth=False) as rt:
        p = Synt(rt).open("one executor for get_now and filter_lists", kind="merge",
                          source={"kind": "introspection", "key": "merge:test", "executors": ["get_now", "filter_lists"],
                                  "evidence": {}})
    code, _ = _generate(monkeypatch, [text(spec_reply()), text(draft())], "approve", p.run_id, "--yes")
    assert code == 0
    states = _states(capsys)
    assert states["get_now"] == "fused" and states["filter_lists"] == "fused" and states["compute_words"] == "active"
    # Fused is still loaded: it runs.
    assert main(["executors", "run", "get_now", "{}"]) == 0

    # No mnest cites get_now (seeds/004: it neither gives nor takes a list); seed mnests cite filter_lists.
    out = _introspect()
    assert out["archived"] == ["get_now"]
    states = _states(capsys)
    assert states["get_now"] == "archived" and states["filter_lists"] == "fused"
    seed_dir = Workspace.from_env().executors_origin_dir("seed")
    assert not (seed_dir / "get_now" / "1.0.0").exists() and (seed_dir / ".archive" / "get_now" / "1.0.0").is_dir()

    capsys.readouterr()
    assert main(["synt", "defuse", "compute_words"]) == 0
    assert "active again: get_now, filter_lists" in capsys.readouterr().out
    states = _states(capsys)
    assert states["get_now"] == "active" and states["filter_lists"] == "active" and states["compute_words"] == "archived"
    assert (seed_dir / "get_now" / "1.0.0" / "manifest.sig").is_file()
    assert main(["executors", "run", "get_now", "{}"]) == 0
    assert main(["executors", "run", "compute_words", '{"text": "a b"}']) == 1


SORTED_LISTING = "list the files in ~/notes sorted by name"
PAIR = "find_files@1.0.0->sort_entries@1.0.0"


def _ask_sorted_listing(monkeypatch, capsys) -> dict:
    """One real turn: the model pipes find_files's entries into sort_entries (from_step), then answers."""
    script = [call("find_files", {"base_path": "~/notes"}), call("sort_entries", {"from_step": 1, "field": "name"}),
              text("a.txt, b.txt")]
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        assert main(["ask", SORTED_LISTING, "--json", "--no-cache"]) == 0
        out = orjson.loads(capsys.readouterr().out)
    # The model made both steps (no cache, no opening read) and answered.
    assert out["status"] == "answered" and out["steps"] == 2 and llm.remaining == 0, out
    return out


def _mnests(capsys) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["mnestome", "list", "--json", "--limit", "1000", "--state", "active", "--state", "decaying"]) == 0
    return {m["key"]: m for m in orjson.loads(capsys.readouterr().out)}


def _age(capsys, at: datetime) -> None:
    capsys.readouterr()
    assert main(["mnestome", "age", "--at", at.isoformat()]) == 0


def test_real_turns_piping_find_files_into_sort_entries_grow_a_mnest_whose_merge_fuses_them_kept_while_it_cites_them(
        home: Path, capsys, monkeypatch) -> None:
    """From a real mnest to fusion, with nothing opened by hand.

    Real `metnos ask` turns in which the (scripted) model pipes find_files into
    sort_entries reinforce the mnest of that pair, one use a turn; one use short
    of the thresholds the introspection proposes nothing, past them it opens one
    `merge` proposal whose evidence is that mnest (id, weight, uses) and the
    shared field. Approved through the seven stages, its executor is active and
    the two sources fused; a fused source still runs. While the mnest is the only
    active one citing them (the seed mnests aged out), the maintenance keeps
    them; once it too has decayed, it archives them. Defused, every turn replays
    clean (a turn replays against the current catalogue, which offers no fused version).
    """
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    (home / "notes").mkdir()
    (home / "notes" / "b.txt").write_text("bb")
    (home / "notes" / "a.txt").write_text("a")
    # The pair's mnest as the first boot planted it (seeds/004 ch. 6): the turns reinforce this very aggregate.
    seed = _mnests(capsys)[PAIR]
    assert seed["state"] == "active" and seed["uses"] < MERGE_USES - 1

    # One use short of the thresholds: no proposal.
    short = MERGE_USES - 1 - seed["uses"]
    turns = [_ask_sorted_listing(monkeypatch, capsys)["turn_id"] for _ in range(short)]
    mnest = _mnests(capsys)[PAIR]
    assert mnest["id"] == seed["id"] and mnest["uses"] == MERGE_USES - 1
    assert _introspect()["proposals"] == [] and _proposals(capsys) == []

    # Ten turns in all: over both thresholds.
    turns += [_ask_sorted_listing(monkeypatch, capsys)["turn_id"] for _ in range(max(1, 10 - short))]
    assert len(turns) >= 10
    mnest = _mnests(capsys)[PAIR]
    assert mnest["id"] == seed["id"] and mnest["state"] == "active"
    assert mnest["uses"] == seed["uses"] + len(turns) >= MERGE_USES and mnest["weight"] >= MERGE_WEIGHT

    out = _introspect()
    [p] = _proposals(capsys)
    assert out["proposals"] == [p["run_id"]]
    assert p["kind"] == "merge" and p["status"] == "requested"
    assert p["source"]["key"] == "merge:find_files+sort_entries"
    assert p["source"]["executors"] == ["find_files", "sort_entries"]
    assert p["source"]["evidence"] == {"mnest": mnest["id"], "weight": mnest["weight"], "uses": mnest["uses"],
                                       "shared_fields": ["entries"]}

    # Approved through the seven stages: the new executor is active, its sources fused.
    code, _ = _generate(monkeypatch, [text(spec_reply()), text(draft())], "approve", p["run_id"], "--yes")
    assert code == 0
    [p] = _proposals(capsys)
    assert p["status"] == "installed"
    states = _states(capsys)
    assert states["find_files"] == "fused" and states["sort_entries"] == "fused" and states["compute_words"] == "active"
    # Fused sources are still loaded: they run.
    capsys.readouterr()
    assert main(["executors", "run", "find_files", '{"base_path": "~/notes"}']) == 0
    assert sorted(e["name"] for e in orjson.loads(capsys.readouterr().out)["entries"]) == ["a.txt", "b.txt"]
    assert main(["executors", "run", "sort_entries", '{"entries": [{"n": 2}, {"n": 1}], "field": "n"}']) == 0
    assert [e["n"] for e in orjson.loads(capsys.readouterr().out)["entries"]] == [1, 2]

    # A month on the seed mnests have decayed under the threshold; the walked one has not,
    # and it is the only active mnest citing either source: the maintenance keeps them.
    now = datetime.now(timezone.utc)
    _age(capsys, now + timedelta(days=31))
    mnests = _mnests(capsys)
    citing = [m["id"] for m in mnests.values() if m["state"] == "active"
              and {m["src_executor"], m["dst_executor"]} & {"find_files", "sort_entries"}]
    assert citing == [mnest["id"]]
    assert _introspect() == {"ok": True, "proposals": [], "archived": []}
    states = _states(capsys)
    assert states["find_files"] == "fused" and states["sort_entries"] == "fused"

    # Once it too has decayed, nothing cites them: archived.
    _age(capsys, now + timedelta(days=120))
    assert _mnests(capsys)[PAIR]["state"] == "decaying"
    assert sorted(_introspect()["archived"]) == ["find_files", "sort_entries"]
    states = _states(capsys)
    assert states["find_files"] == "archived" and states["sort_entries"] == "archived"

    # Defused, the catalogue is the one the turns ran against (a turn replays against the current
    # catalogue, and fused or archived versions are not offered to a turn): every turn replays clean.
    capsys.readouterr()
    assert main(["synt", "defuse", "compute_words"]) == 0
    states = _states(capsys)
    assert states["find_files"] == "active" and states["sort_entries"] == "active" and states["compute_words"] == "archived"
    capsys.readouterr()
    assert main(["replay", "--all"]) == 0, capsys.readouterr()
    assert f"{len(turns)} turns: same path" in capsys.readouterr().out
