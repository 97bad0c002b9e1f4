"""Issue 20 items 1, 3 and 5: the LLM judge and the planner's modes, against real model servers on 127.0.0.1.

Each server speaks a real wire format (OpenAI chat completions or Anthropic
Messages, tests/support/scripted_llm.py); executors run in bubblewrap; the
turn is replayed from the log afterwards.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.settings.workspace import Workspace
from tests.integration.test_side_effect_gate import events_of, kind
from tests.support.scripted_llm import ScriptedLLM, call, text


def configure(body: str) -> None:
    config = Workspace.from_env().config_file
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(body)


def ask(capsys, monkeypatch, llm: ScriptedLLM, *argv: str, provider: str = "openai") -> tuple[int, dict]:
    monkeypatch.setenv("METNOS_LLM_URL", llm.url)
    monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
    monkeypatch.setenv("METNOS_LLM_PROVIDER", provider)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
    capsys.readouterr()
    code = main(["ask", *argv, "--json", "--no-cache"])
    return code, orjson.loads(capsys.readouterr().out)


def replays_clean(capsys, turn_id: str) -> None:
    capsys.readouterr()
    code = main(["replay", turn_id, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out


def shown(capsys, turn_id: str) -> str:
    capsys.readouterr()
    assert main(["turns", "show", turn_id]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_llm_judge_refuses_a_step_in_a_context_of_its_own(home: Path, capsys, monkeypatch, provider: str) -> None:
    configure('[runtime.judge]\nenabled = true\nthreshold = 0.5\n')
    target = home / "todo.md"
    script = [call("write_files", {"files": [{"path": str(target), "content": "rm -rf everything\n"}]}),
              text('{"score": 0.1, "reason": "the user asked for a shopping note, not this content"}'),
              text("I could not save it.")]
    with ScriptedLLM(script) as llm:
        code, out = ask(capsys, monkeypatch, llm, "save a note to todo.md: buy milk", "--yes", provider=provider)
        judged = llm.requests[1]
    assert not target.exists()
    assert out["status"] == "refused" and code == 3, out
    # Its own context: its instructions, the request and the one call; none of the proposer's tools or turns.
    assert judged.tool_names == []
    said = orjson.dumps(judged.body).decode()
    assert "buy milk" in said and "write_files" in said and "score" in said
    assert "You are Metnos" not in said and len([m for m in judged.messages if m["role"] == "user"]) == 1
    events = events_of(capsys, out["turn_id"])
    [verdict] = [e["state"]["verdict"] for e in events if kind(e) == "StepJudgedByModel"]
    assert verdict["decision"] == "deny" and verdict["score"] == 0.1 and verdict["tier"] == "middle"
    assert "shopping note" in verdict["reason"]
    asked = [e["state"] for e in events if kind(e) == "LLMAsked"]
    assert [a["role"] for a in asked] == ["proposer", "judge", "proposer"]
    assert "StepInvoked" not in [kind(e) for e in events] and "ApprovalAsked" not in [kind(e) for e in events]
    observed = [e["state"]["observation"] for e in events if kind(e) == "ObservationRecorded"]
    assert observed[0]["error_class"] == "vaglio_denied" and "LLM judge refused write_files" in observed[0]["error"]
    assert "LLM judge (middle, scripted-model): deny, score 0.10 (threshold 0.50)" in shown(capsys, out["turn_id"])
    replays_clean(capsys, out["turn_id"])


def test_the_judge_passes_a_fitting_step_and_skips_what_its_capabilities_do_not_name(home: Path, capsys, monkeypatch) -> None:
    configure('[runtime.judge]\nenabled = true\ncapabilities = ["fs:write"]\n')
    target = home / "todo.md"
    script = [call("get_now", {}),
              call("write_files", {"files": [{"path": str(target), "content": "- buy milk\n"}]}),
              text('{"score": 0.9, "reason": "a note as asked"}'),
              text("saved")]
    with ScriptedLLM(script) as llm:
        code, out = ask(capsys, monkeypatch, llm, "what time is it? then save a note to todo.md: buy milk", "--yes")
    assert code == 0 and target.read_text() == "- buy milk\n", out
    events = events_of(capsys, out["turn_id"])
    verdicts = [e["state"] for e in events if kind(e) == "StepJudgedByModel"]
    # get_now holds no fs:write: not judged; write_files is, and passes.
    assert [(v["step"], v["verdict"]["decision"]) for v in verdicts] == [(2, "ask")]
    replays_clean(capsys, out["turn_id"])


def test_an_unreadable_judge_refuses(home: Path, capsys, monkeypatch) -> None:
    configure('[runtime.judge]\nenabled = true\n')
    target = home / "todo.md"
    script = [call("write_files", {"files": [{"path": str(target), "content": "x"}]}), text("looks fine to me"), text("not saved")]
    with ScriptedLLM(script) as llm:
        _, out = ask(capsys, monkeypatch, llm, "save a note to todo.md: x", "--yes")
    assert not target.exists() and out["status"] == "refused", out
    [verdict] = [e["state"]["verdict"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "StepJudgedByModel"]
    assert verdict["score"] is None and "not a verdict" in verdict["reason"]


def plan(steps: list, answer: str) -> str:
    return orjson.dumps({"steps": [{"executor": e, "args": a} for e, a in steps], "answer": answer}).decode()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_online_turn_plans_three_piped_steps_in_one_call(home: Path, capsys, monkeypatch, provider: str) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "milk.md").write_text("buy milk")
    digest = home / "digest.txt"
    three = plan([("find_files", {"base_path": "~/notes", "pattern": "*.md"}),
                  ("read_files", {"from_step": 1}),
                  ("write_files", {"files": [{"path": "~/digest.txt", "content": "{{step2.entries.0.content}}"}]})],
                 "Copied into ~/digest.txt: {{step2.entries.0.content}}")
    with ScriptedLLM([text(three)]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "copy my markdown note into ~/digest.txt", "--yes", "--mode", "online", provider=provider)
        sent = llm.requests
    assert code == 0 and out["answer"] == "Copied into ~/digest.txt: buy milk", out
    assert digest.read_text() == "buy milk"
    # One model call planned everything; the steps ran with none.
    assert len(sent) == 1 and sent[0].tool_names == []
    assert out["models"] == [{"tier": "wise", "role": "online", "model": "scripted-model"}]
    events = events_of(capsys, out["turn_id"])
    kinds = [kind(e) for e in events]
    assert kinds.count("LLMAsked") == 1 and kinds.count("StepInvoked") == 3
    assert events[0]["state"]["mode"] == "online"
    piped = [(e["state"]["src_step"], e["state"]["dst_step"], e["state"]["mechanism"]) for e in events if kind(e) == "DataPiped"]
    assert [(s, d) for s, d, _ in piped] == [(1, 2), (2, 3)]
    # The write still asked (and --yes answered): the plan passes the same gate.
    assert [e["state"]["executor"] for e in events if kind(e) == "ApprovalAsked"] == ["write_files"]
    [proposed] = [e["state"] for e in events if kind(e) == "OnlinePlanProposed"]
    assert [s["executor"] for s in proposed["plan"]["steps"]] == ["find_files", "read_files", "write_files"]
    page = shown(capsys, out["turn_id"])
    assert "asked the wise tier as online" in page and "sent (user): copy my markdown note into ~/digest.txt" in page
    replays_clean(capsys, out["turn_id"])


def test_an_online_plan_with_a_failing_step_gets_one_recovery_call(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "a.md").write_text("alpha")
    first = plan([("read_files", {"paths": ["~/notes/missing.md"], "bogus": 1})], "{{step1.entries.0.content}}")
    second = plan([("read_files", {"paths": ["~/notes/a.md"]})], "It says {{step1.entries.0.content}}")
    with ScriptedLLM([text(first), text(second)]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "what does my note say?", "--mode", "online")
        recovery = llm.requests[1]
    assert code == 0 and out["answer"] == "It says alpha", orjson.dumps(out).decode()
    assert "did not succeed" in orjson.dumps(recovery.body).decode()
    events = events_of(capsys, out["turn_id"])
    assert [e["state"]["role"] for e in events if kind(e) == "LLMAsked"] == ["online", "recovery"]
    proposed = [e["state"] for e in events if kind(e) == "OnlinePlanProposed"]
    assert [p["recovery"] for p in proposed] == [False, True]
    # The recovery's step 1 is the turn's step 2, and its answer reads step 2.
    assert proposed[1]["plan"]["steps"][1]["executor"] == "read_files"
    replays_clean(capsys, out["turn_id"])


def test_a_hybrid_turn_escalates_to_the_online_model_after_a_local_failure(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "a.md").write_text("alpha")
    online_plan = plan([("read_files", {"paths": ["~/notes/a.md"]})], "Your note says {{step1.entries.0.content}}")
    with ScriptedLLM([call("read_files", {"pathz": 1})]) as local, ScriptedLLM([text(online_plan)]) as online:
        configure(f'[runtime]\nmode = "hybrid"\n\n[llm.tiers.wise]\nprovider = "openai"\nurl = "{local.url}"\nmodel = "local-0.5b"\n\n'
                  f'[llm.tiers.frontier]\nprovider = "anthropic"\nurl = "{online.url}"\nmodel = "online-model"\n')
        for var in ("METNOS_LLM_URL", "METNOS_LLM_MODEL", "METNOS_LLM_PROVIDER"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
        capsys.readouterr()
        code = main(["ask", "what does my note a.md say?", "--json", "--no-cache"])
        out = orjson.loads(capsys.readouterr().out)
        assert online.requests[0].dialect == "anthropic" and len(local.requests) == 1
        assert local.requests[0].body["model"] == "local-0.5b" and online.requests[0].body["model"] == "online-model"
    assert code == 0 and out["answer"] == "Your note says alpha", out
    assert [(m["tier"], m["role"]) for m in out["models"]] == [("wise", "proposer"), ("frontier", "online")]
    events = events_of(capsys, out["turn_id"])
    [escalated] = [e["state"] for e in events if kind(e) == "ModeEscalated"]
    assert escalated["tier"] == "frontier" and escalated["reason"].startswith("a local step failed")
    [plan_event] = [e["state"] for e in events if kind(e) == "OnlinePlanProposed"]
    assert plan_event["plan"]["steps"][0] is None and plan_event["plan"]["steps"][1]["executor"] == "read_files"
    replays_clean(capsys, out["turn_id"])


def test_a_hybrid_turn_stays_local_when_nothing_escalates(home: Path, capsys, monkeypatch) -> None:
    configure('[runtime]\nmode = "hybrid"\n')
    with ScriptedLLM([call("get_now", {}), text("It is now.")]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "what time is it?")
    assert code == 0, out
    kinds = [kind(e) for e in events_of(capsys, out["turn_id"])]
    assert "ModeEscalated" not in kinds and "OnlinePlanProposed" not in kinds
    assert [m["role"] for m in out["models"]] == ["proposer", "proposer"]


def test_a_hybrid_turn_escalates_at_once_for_a_critical_executor_and_for_the_users_mark(home: Path, capsys, monkeypatch) -> None:
    configure('[runtime]\nmode = "hybrid"\n\n[runtime.hybrid]\ncritical = ["fs:write"]\n')
    note = plan([("write_files", {"files": [{"path": "~/todo.md", "content": "milk"}]})], "Saved.")
    with ScriptedLLM([call("write_files", {"files": [{"path": "~/todo.md", "content": "local"}]}), text(note)]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "save milk to todo.md", "--yes")
    assert code == 0 and (home / "todo.md").read_text() == "milk", out
    [escalated] = [e["state"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "ModeEscalated"]
    assert escalated["reason"] == "write_files holds fs:write, listed as critical"
    with ScriptedLLM([text(plan([("get_now", {})], "It is {{step1.content}}"))]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "!online what time is it?")
    assert code == 0 and out["answer"].startswith("It is "), out
    [escalated] = [e["state"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "ModeEscalated"]
    assert escalated["reason"] == "the request is marked !online"


def test_a_failing_step_moves_the_proposer_up_to_the_next_distinct_tier(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "a.md").write_text("alpha")
    with ScriptedLLM([call("read_files", {"pathz": 1})]) as small, \
            ScriptedLLM([call("read_files", {"paths": ["~/notes/a.md"]}), text("It says alpha.")]) as big:
        configure('[runtime]\nproposer_tier = "fast"\n\n[runtime.prompts]\nproposer = "Reply in one short sentence."\n\n'
                  f'[llm.tiers.fast]\nprovider = "openai"\nurl = "{small.url}"\nmodel = "small"\n\n'
                  f'[llm.tiers.wise]\nprovider = "openai"\nurl = "{big.url}"\nmodel = "big"\ntemperature = 0.3\nmax_tokens = 300\n'
                  'reasoning = false\n')
        for var in ("METNOS_LLM_URL", "METNOS_LLM_MODEL", "METNOS_LLM_PROVIDER"):
            monkeypatch.delenv(var, raising=False)
        capsys.readouterr()
        code = main(["ask", "what does my note a.md say?", "--json", "--no-cache"])
        out = orjson.loads(capsys.readouterr().out)
        asked_big = big.requests[0].body
    assert code == 0 and out["answer"] == "It says alpha.", out
    # The wise tier's own parameters and the proposer's added words went with the call.
    assert asked_big["temperature"] == 0.3 and asked_big["max_tokens"] == 300
    assert asked_big["chat_template_kwargs"] == {"enable_thinking": False}
    assert asked_big["messages"][0]["role"] == "system" and "Reply in one short sentence." in asked_big["messages"][0]["content"]
    events = events_of(capsys, out["turn_id"])
    [climbed] = [e["state"] for e in events if kind(e) == "TierEscalated"]
    assert (climbed["from_tier"], climbed["to_tier"]) == ("fast", "wise") and "schema" in climbed["reason"]
    assert [e["state"]["tier"] for e in events if kind(e) == "LLMAsked"] == ["fast", "wise", "wise"]
    replies = [e["state"]["reply"] for e in events if kind(e) == "LLMReplied"]
    assert all(r["model"] and r["usage"]["input_tokens"] is not None for r in replies)
    assert events[0]["state"]["runtime"]["tier_ladder"] == ["fast", "wise"]
    replays_clean(capsys, out["turn_id"])


def test_one_configured_model_has_no_tier_to_climb(home: Path, capsys, monkeypatch) -> None:
    with ScriptedLLM([call("read_files", {"pathz": 1}), text("I could not read it.")]) as llm:
        _, out = ask(capsys, monkeypatch, llm, "what does my note a.md say?")
    events = events_of(capsys, out["turn_id"])
    assert "TierEscalated" not in [kind(e) for e in events]
    assert events[0]["state"]["runtime"]["tier_ladder"] == ["fast"]


def test_a_hybrid_turn_that_hits_a_cap_escalates_and_ask_names_both_models(home: Path, capsys, monkeypatch) -> None:
    configure('[runtime]\nmode = "hybrid"\n\n[turn]\ncap_same_executor = 1\n')
    # The caps still hold after the escalation: the online plan does the write with what the turn has.
    online_plan = plan([("write_files", {"files": [{"path": "~/t.txt", "content": "the time"}]})], "Saved the time to ~/t.txt.")
    with ScriptedLLM([call("get_now", {}), call("get_now", {"timezone": "UTC"}), text(online_plan)]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        # A request that acts keeps its tools, so the second call reaches the cap (one that only
        # reads is asked for words once a step gives a single value, such as the time).
        code = main(["ask", "what time is it? write it to ~/t.txt", "--no-cache", "--yes"])
        said = capsys.readouterr()
    assert code == 0 and said.out.strip() == "Saved the time to ~/t.txt.", said
    assert (home / "t.txt").read_text().strip()
    assert "answered by scripted-model (wise tier, 2 calls as proposer)" in said.err
    assert "(frontier tier, 1 call as online)" in said.err


def test_an_online_plan_that_answers_a_request_for_an_action_without_it_is_not_done(home: Path, capsys, monkeypatch) -> None:
    with ScriptedLLM([text(plan([("get_now", {})], "The time is {{step1.content}}."))]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "what time is it? write it to ~/t.txt", "--yes", "--mode", "online")
    assert code == 1 and out["failure"]["kind"] == "action_not_taken" and "write_files" in out["failure"]["message"], out
    assert not (home / "t.txt").exists()


def test_optional_arguments_written_out_blank_are_left_to_their_defaults(home: Path, capsys, monkeypatch) -> None:
    (home / "Documents").mkdir()
    (home / "Documents" / "draft.txt").write_text("the draft")
    # The 1.5B's online plan, as it wrote it: every optional argument of move_files, blank.
    blank = plan([("move_files", {"moves": [{"src": "~/Documents/draft.txt", "dst": "~/Documents/final.txt"}],
                                  "paths": [], "dest_dir": "", "overwrite": False, "make_parents": True})],
                 "Renamed to ~/Documents/final.txt.")
    with ScriptedLLM([text(blank)]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "Rename ~/Documents/draft.txt to ~/Documents/final.txt.", "--yes", "--mode", "online")
    assert code == 0 and (home / "Documents" / "final.txt").read_text() == "the draft", out
    events = events_of(capsys, out["turn_id"])
    [resolved] = [e["state"] for e in events if kind(e) == "StepResolved"]
    assert resolved["completed"] == {"dropped": ["dest_dir"]} and "dest_dir" not in resolved["args"]
    # What the schema takes stays, blank or not.
    assert resolved["args"]["paths"] == [] and resolved["args"]["overwrite"] is False
    replays_clean(capsys, out["turn_id"])



def test_an_argument_that_names_no_step_is_refused_and_never_written(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "a.md").write_text("alpha")
    stray = plan([("read_files", {"paths": ["~/notes/a.md"]}),
                  ("write_files", {"files": [{"path": "~/copy.md", "content": "{{read_files.content}}"}]})], "Copied.")
    fixed = orjson.dumps({"steps": [{"executor": "write_files",
                                     "args": {"files": [{"path": "~/copy.md", "content": "{{earlier1.entries.0.content}}"}]}}],
                          "answer": "Copied."}).decode()
    with ScriptedLLM([text(stray), text(fixed)]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "copy ~/notes/a.md to ~/copy.md", "--yes", "--mode", "online")
        recovery = orjson.dumps(llm.requests[1].body).decode()
    assert code == 0 and (home / "copy.md").read_text() == "alpha", out
    assert "names no step" in recovery
    rejected = [e["state"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "StepRejected"]
    assert [r["kind"] for r in rejected] == ["piping"]
    replays_clean(capsys, out["turn_id"])


def test_an_online_answer_that_quotes_no_step_is_not_shown_as_the_answer(home: Path, capsys, monkeypatch) -> None:
    stray = plan([("get_now", {})], "It is {{get_now.content}}.")
    fixed = orjson.dumps({"steps": [], "answer": "It is {{earlier1.content}}."}).decode()
    with ScriptedLLM([text(stray), text(fixed)]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "what time is it?", "--mode", "online")
        recovery = orjson.dumps(llm.requests[1].body).decode()
    assert code == 0 and "{{" not in out["answer"] and out["answer"].startswith("It is 20"), out
    assert "names no step" in recovery
    replays_clean(capsys, out["turn_id"])


def test_a_hybrid_turn_escalates_when_the_local_loop_ends_without_doing_the_action(home: Path, capsys, monkeypatch) -> None:
    configure('[runtime]\nmode = "hybrid"\n')
    online_plan = plan([("get_now", {}), ("write_files", {"files": [{"path": "~/t.txt", "content": "{{step1.content}}"}]})],
                       "Saved the time to ~/t.txt.")
    # Words twice instead of the write the request names: the local loop ends action_not_taken.
    with ScriptedLLM([text("It is noon."), text("It is noon, as I said."), text(online_plan)]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "what time is it? write it to ~/t.txt", "--yes")
    assert code == 0 and out["answer"] == "Saved the time to ~/t.txt.", out
    assert (home / "t.txt").read_text().startswith("20")
    [escalated] = [e["state"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "ModeEscalated"]
    assert escalated["reason"].startswith("the local loop ended: action_not_taken"), escalated
    replays_clean(capsys, out["turn_id"])


def test_a_hybrid_turn_escalates_when_the_local_loop_hands_back_data_that_is_no_figure(home: Path, capsys, monkeypatch) -> None:
    configure('[runtime]\nmode = "hybrid"\n\n[turn]\nopening_reads = false\n')
    (home / "notes").mkdir()
    (home / "notes" / "a.md").write_text("one\ntwo\nthree\n")
    read = call("read_files", {"paths": ["~/notes/a.md"]})
    # The online model answers from what the turn already read (its plan needs no step).
    online_plan = orjson.dumps({"steps": [], "answer": "It has 3 lines."}).decode()
    # The same read again and again: the loop ends with the data, which is no figure.
    with ScriptedLLM([read, read, read, read, text(online_plan)]) as llm:
        code, out = ask(capsys, monkeypatch, llm, "how many lines are in ~/notes/a.md?")
    assert code == 0 and out["answer"] == "It has 3 lines.", out
    [escalated] = [e["state"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "ModeEscalated"]
    assert escalated["reason"].startswith("the local loop ended: unusable_answer"), escalated
    replays_clean(capsys, out["turn_id"])
