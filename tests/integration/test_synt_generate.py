"""`metnos synt generate`: seven stages, two gates, a scripted model on a real HTTP server,
birth tests in the real sandbox, in both layouts. Nothing unapproved is installed."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.support.scripted_llm import ScriptedLLM, text

SPEC = {
    "name": "compute_words",
    "summary": "Count the words of a text.",
    "description": "Counts the words of a text, split on white space. Returns ok and count.",
    "input_schema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}},
                     "additionalProperties": False},
    "output_schema": {"type": "object", "required": ["ok"], "properties": {
        "ok": {"type": "boolean"}, "count": {"type": "integer"},
        "error": {"type": "object", "properties": {"class": {"type": "string"}, "message": {"type": "string"}}}}},
    "capabilities": {},
    "error_classes": [],
    "examples": [{"description": "count the words of a sentence", "args": {"text": "one two three"}}],
}

MAIN = '''def run(args, ctx):
    return {"ok": True, "count": len(args["text"].split())}
'''
BIRTH = '''def birth_counts_words(run, tmp):
    assert run({"text": "one two  three"})["count"] == 3


def birth_empty_text(run, tmp):
    assert run({"text": ""})["count"] == 0
'''


def draft(main_py: str = MAIN, birth_py: str = BIRTH, capabilities: dict | None = None) -> str:
    reply = f"```python\n# main.py\n{main_py}```\n\n```python\n# tests/birth.py\n{birth_py}```\n"
    if capabilities is not None:
        reply += "```json\n" + json.dumps({"capabilities": capabilities}) + "\n```\n"
    return reply


def spec_reply(**changes) -> str:
    return "Here it is:\n```json\n" + json.dumps({**SPEC, **changes}) + "\n```"


def installed(name: str = "compute_words") -> Path:
    return Workspace.from_env().executors_origin_dir("synt") / name


def _generate(monkeypatch, script, *args: str) -> tuple[int, ScriptedLLM]:
    with ScriptedLLM(list(script)) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        code = main(["synt", *args])
    return code, llm


def _proposal(capsys) -> dict:
    capsys.readouterr()
    assert main(["synt", "list", "--json"]) == 0
    rows = orjson.loads(capsys.readouterr().out)["proposals"]
    assert len(rows) == 1
    assert main(["synt", "show", rows[0]["run_id"], "--json"]) == 0
    return orjson.loads(capsys.readouterr().out)


def test_a_good_draft_is_installed_only_after_both_approvals(home: Path, capsys, monkeypatch) -> None:
    code, llm = _generate(monkeypatch, [text(spec_reply())], "generate", "count the words of a text")
    assert code == 0
    view = _proposal(capsys)
    assert view["status"] == "awaiting_spec"
    assert len(llm.requests) == 1 and "count the words of a text" in llm.requests[0].messages[-1]["content"]
    assert not installed().exists()
    run_id = view["run_id"]

    # Gate one: the draft, its checks and its birth tests run, and it waits again.
    code, llm = _generate(monkeypatch, [text(draft())], "approve", run_id)
    assert code == 0
    view = _proposal(capsys)
    assert view["status"] == "awaiting_code"
    stages = [s["stage"] for s in view["stages"]]
    assert stages == ["specification", "specification approved", "draft", "profile", "static checks", "birth tests"]
    birth = view["stages"][-1]
    assert birth["ok"] and [c["name"] for c in birth["cases"]] == ["birth_counts_words", "birth_empty_text"]
    assert view["stages"][3]["capabilities"] == {}
    assert not installed().exists()

    # Gate two: signed, installed, and active after the boot that follows.
    code, llm = _generate(monkeypatch, [], "approve", run_id)
    assert code == 0 and llm.requests == []
    out = capsys.readouterr().out
    assert "compute_words 1.0.0: active" in out
    view = _proposal(capsys)
    assert view["status"] == "installed" and view["stages"][-1]["path"] == "synt/compute_words/1.0.0"
    folder = installed() / "1.0.0"
    assert (folder / "manifest.sig").is_file() and (folder / "main.py").read_text() == MAIN
    assert 'created_by = "synt:' + run_id + '"' in (folder / "manifest.toml").read_text()

    # It runs like any executor, and every stage is in the log.
    capsys.readouterr()
    assert main(["executors", "run", "compute_words", '{"text": "a b c d"}']) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 4
    assert main(["events", "--json"]) == 0
    types = [json.loads(line)["topic"] for line in capsys.readouterr().out.splitlines() if line.strip()]
    for t in ("ProposalOpened", "SpecificationDrafted", "SpecificationApproved", "DraftWritten", "ProfileDerived",
              "StaticChecked", "BirthTested", "CodeApproved", "ExecutorInstalled"):
        assert any(x.endswith(t) for x in types), t


def test_yes_runs_every_stage_and_rebuild_gives_the_same_proposals(home: Path, capsys, monkeypatch) -> None:
    code, _ = _generate(monkeypatch, [text(spec_reply()), text(draft())], "generate", "--yes", "count the words")
    assert code == 0
    assert (installed() / "1.0.0" / "manifest.sig").is_file()
    before = _proposal(capsys)
    assert before["status"] == "installed"
    assert main(["rebuild"]) == 0
    assert _proposal(capsys) == before


@pytest.mark.parametrize("bad", ["eval", "import", "wider"])
def test_a_bad_draft_is_never_installed_and_gets_one_repair_round(home: Path, capsys, monkeypatch, bad: str) -> None:
    drafts = {
        "eval": draft('def run(args, ctx):\n    return {"ok": True, "count": eval("len(args[\'text\'].split())")}\n'),
        "import": draft('import socket\n\n\ndef run(args, ctx):\n    return {"ok": True, "count": 0}\n'),
        "wider": draft(capabilities={"network": ["example.org"]}),
    }
    code, llm = _generate(monkeypatch, [text(spec_reply()), text(drafts[bad]), text(drafts[bad])],
                          "generate", "--yes", "count the words")
    assert code == 1
    view = _proposal(capsys)
    assert view["status"] == "failed"
    # The repair round was asked, with the failure in it.
    assert len(llm.requests) == 3
    repair = llm.requests[2].messages[-1]["content"]
    assert "It failed:" in repair
    want = {"eval": "eval is not allowed", "import": "import socket: it needs network",
            "wider": "which the approved specification does not grant"}[bad]
    assert want in repair and want in view["stages"][-1]["reason"]
    assert not installed().exists()
    assert not any((Workspace.from_env().runtime_dir / "synt").glob("*/compute_words/1.0.0/manifest.sig"))


def test_a_failing_birth_test_is_repaired_once_then_the_proposal_fails(home: Path, capsys, monkeypatch) -> None:
    wrong = draft('def run(args, ctx):\n    return {"ok": True, "count": len(args["text"])}\n')
    code, llm = _generate(monkeypatch, [text(spec_reply()), text(wrong), text(wrong)], "generate", "--yes", "count words")
    assert code == 1
    view = _proposal(capsys)
    births = [s for s in view["stages"] if s["stage"] == "birth tests"]
    assert [b["round"] for b in births] == [0, 1] and not any(b["ok"] for b in births)
    assert "birth_counts_words" in llm.requests[2].messages[-1]["content"]
    assert view["status"] == "failed" and not installed().exists()


def test_a_repair_that_works_goes_on_to_the_code_gate(home: Path, capsys, monkeypatch) -> None:
    wrong = draft('def run(args, ctx):\n    return {"ok": True, "count": len(args["text"])}\n')
    code, _ = _generate(monkeypatch, [text(spec_reply()), text(wrong), text(draft())], "generate", "--yes", "count words")
    assert code == 0
    view = _proposal(capsys)
    assert view["status"] == "installed"
    assert [s["ok"] for s in view["stages"] if s["stage"] == "birth tests"] == [False, True]


def test_a_rejected_proposal_installs_nothing_and_stays_closed(home: Path, capsys, monkeypatch) -> None:
    _generate(monkeypatch, [text(spec_reply())], "generate", "count the words")
    run_id = _proposal(capsys)["run_id"]
    assert main(["synt", "reject", run_id, "--reason", "not now"]) == 0
    view = _proposal(capsys)
    assert view["status"] == "rejected" and view["stages"][-1]["reason"] == "not now"
    assert main(["synt", "approve", run_id]) == 2
    assert "already rejected" in capsys.readouterr().err
    assert not installed().exists()


def test_a_specification_that_takes_a_seed_name_fails_after_one_repair_and_says_why(home: Path, capsys, monkeypatch) -> None:
    bad = text(spec_reply(name="read_files"))
    code, llm = _generate(monkeypatch, [bad, bad], "generate", "--yes", "read files")
    assert code == 1
    assert "already exists" in llm.requests[1].messages[-1]["content"]
    view = _proposal(capsys)
    assert view["status"] == "failed" and "already exists" in view["stages"][-1]["reason"]


def test_a_bare_schema_and_a_synonym_verb_are_normalised_and_a_bad_spec_repaired(home: Path, capsys, monkeypatch) -> None:
    bare = text(spec_reply(name="count_words", input_schema={"type": "string"}, examples=[]))
    broken = text("I think the tool should count words.")
    code, llm = _generate(monkeypatch, [broken, bare], "generate", "count the words of a text")
    assert code == 0 and len(llm.requests) == 2
    spec = _proposal(capsys)["stages"][0]["spec"]
    assert spec["name"] == "compute_words"
    assert spec["input_schema"] == {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}


def test_a_turn_that_lacks_a_tool_leaves_a_proposal_never_installed_unasked(home: Path, capsys, monkeypatch) -> None:
    from tests.support.scripted_llm import call

    script = [call("compute_words", {"text": "one two three"}), text("I cannot count the words with the tools I have.")]
    for _ in range(2):
        with ScriptedLLM(list(script)) as llm:
            monkeypatch.setenv("METNOS_LLM_URL", llm.url)
            monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
            capsys.readouterr()
            # The turn fails, honestly; its message says what is missing and what was left.
            assert main(["ask", "--json", "count the words of 'one two three'"]) == 1
        answer = orjson.loads(capsys.readouterr().out)["failure"]["message"]
        assert "No executor does 'compute_words'" in answer and "metnos synt approve" in answer
    # Two turns with the same gap: one proposal, waiting, naming the turn and the wanted executor.
    view = _proposal(capsys)
    assert view["status"] == "requested" and view["source"]["kind"] == "turn"
    assert view["source"]["wanted"] == "compute_words" and view["run_id"] in answer
    assert not installed().exists()

    # Approving the request drafts a specification and stops there: the user sees it first.
    code, _ = _generate(monkeypatch, [text(spec_reply())], "approve", view["run_id"])
    assert code == 0
    assert _proposal(capsys)["status"] == "awaiting_spec"
    assert not installed().exists()


def test_a_turn_without_a_gap_opens_no_proposal(home: Path, capsys, monkeypatch) -> None:
    from tests.support.scripted_llm import call

    script = [call("get_now", {}), text("It is now.")]
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        assert main(["ask", "what time is it"]) == 0
    capsys.readouterr()
    assert main(["synt", "list", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["proposals"] == []


def test_generate_from_a_suggestion_of_the_maintenance(home: Path, capsys, monkeypatch) -> None:
    from domain.synthesis import Synthesis
    from metnos.runtime.booted import Runtime

    with Runtime.boot(birth=False) as rt:
        s = Synthesis.open(wanted="compute_words", at=rt.clock())
        s.suggest(source="read_files", uses=3, weight=0.4, outcome="generate", chain=None, at=rt.clock())
        rt.log.save(s)
    capsys.readouterr()
    assert main(["synt", "list"]) == 0
    listing = capsys.readouterr().out
    assert "compute_words" in listing and str(s.id)[:8] in listing
    code, llm = _generate(monkeypatch, [text(spec_reply())], "generate", "--from", str(s.id)[:8])
    assert code == 0
    view = _proposal(capsys)
    assert view["source"] == {"kind": "suggestion", "id": str(s.id), "wanted": "compute_words", "from": "read_files"}
    assert view["status"] == "awaiting_spec" and "compute_words" in llm.requests[0].messages[-1]["content"]
    capsys.readouterr()
    assert main(["synt", "generate", "--from", "nosuch"]) == 2
    assert "no suggestion" in capsys.readouterr().err
