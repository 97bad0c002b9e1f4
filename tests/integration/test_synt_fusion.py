"""The introspective cascade in the maintenance, and Fused made real: kept while cited,
archived when not, defused back. Real log, real sandbox, scripted model, both layouts."""

from __future__ import annotations

from pathlib import Path

import orjson

from domain.invocation import Invocation
from metnos.canonical import canonical_hash
from metnos.cli import main
from metnos.runtime import Runtime
from metnos.scheduler.callbacks import CallbackContext
from metnos.scheduler.maintenance import run_synt_introspect
from metnos.synt.pipeline import Synt
from metnos.workspace import Workspace
from tests.integration.test_synt_generate import _generate, draft, spec_reply
from tests.support.scripted_llm import text


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
