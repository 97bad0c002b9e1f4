"""Constrained planner calls against a real HTTP server on 127.0.0.1 (the scripted LLM).

The grammar goes to a server that says it is llama.cpp, with tool_choice
"none" beside the tools; a server that refuses it (HTTP 400) gets the plain
request, once, and the reply's record says which was used. The turn's events
carry that record and replay clean, with it or (as before it existed) without.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from uuid import UUID

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.mechanisms.llm.messages import SystemMessage, ToolSpec, UserMessage
from metnos.mechanisms.llm.provider import make_provider
from metnos.runtime.turn.call_schema import planner_constraint
from metnos.settings.llm_tiers import TierConfig
from metnos.settings.workspace import Workspace
from tests.support.scripted_llm import ScriptedLLM, call, http_error, text, text_call

READ = ToolSpec("read_files", "Read files.", {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}},
                                              "required": ["paths"]})
CONVO = [SystemMessage("sys"), UserMessage("what is in ~/x?")]
REFUSAL = "Unknown field: grammar"


def provider(url: str, **kw):
    return make_provider(TierConfig(provider="openai", url=url, model="m", **kw), env={})


def test_the_grammar_is_sent_beside_the_tools_and_the_call_read_back() -> None:
    constraint = planner_constraint([READ], {}, words_only=False)
    with ScriptedLLM([text_call("read_files", {"paths": ["~/x"]}), text("x says hello")], llama_cpp=True) as llm:
        p = provider(llm.url)
        first = p.complete(CONVO, [READ], constraint=constraint)
        second = p.complete(CONVO, [READ], constraint=planner_constraint([READ], {}, words_only=True), tool_choice="none")
    body = llm.requests[0].body
    assert body["grammar"] == constraint.grammar() and body["tool_choice"] == "none"
    assert llm.requests[0].tool_names == ["read_files"]  # the prompt is the one an unconstrained round makes
    assert first.call_form == "text-json" and first.tool_calls[0].name == "read_files" and first.tool_calls[0].arguments == {"paths": ["~/x"]}
    assert first.constraint == {"form": "llguidance", "digest": constraint.digest, "sent": True}
    assert "start: answer" in llm.requests[1].body["grammar"]
    assert second.is_final and second.text == "x says hello" and second.constraint["sent"] is True


def test_a_server_refusing_the_grammar_gets_the_plain_request_and_the_reply_says_so() -> None:
    constraint = planner_constraint([READ], {}, words_only=False)
    with ScriptedLLM([http_error(400, REFUSAL), call("read_files", {"paths": ["~/x"]}), text("hello")], llama_cpp=True) as llm:
        p = provider(llm.url)
        first = p.complete(CONVO, [READ], constraint=constraint)
        second = p.complete(CONVO, [READ], constraint=constraint)
    sent = [r.body for r in llm.requests]
    assert len(sent) == 3
    assert "grammar" in sent[0]
    # The same request without the grammar, and no grammar asked again of this server.
    assert {k: v for k, v in sent[0].items() if k not in ("grammar", "tool_choice")} == sent[1]
    assert "grammar" not in sent[2] and "tool_choice" not in sent[2]
    assert first.call_form == "native" and first.tool_calls[0].name == "read_files"
    assert first.constraint["sent"] is False and "HTTP 400" in first.constraint["why_not"] and REFUSAL in first.constraint["why_not"]
    assert second.constraint == first.constraint


def test_another_http_error_is_not_taken_for_a_refusal() -> None:
    from metnos.mechanisms.llm.errors import ProviderHTTPError

    with ScriptedLLM([http_error(500, "out of memory")], llama_cpp=True) as llm:
        with pytest.raises(ProviderHTTPError):
            provider(llm.url).complete(CONVO, [READ], constraint=planner_constraint([READ], {}, words_only=False))
    assert len(llm.requests) == 1


def test_a_server_that_does_not_say_it_is_llama_cpp_gets_no_grammar() -> None:
    with ScriptedLLM([call("read_files", {"paths": ["~/x"]})]) as llm:
        reply = provider(llm.url).complete(CONVO, [READ], constraint=planner_constraint([READ], {}, words_only=False))
    assert "grammar" not in llm.requests[0].body and "tool_choice" not in llm.requests[0].body
    assert reply.constraint["sent"] is False and "/props" in reply.constraint["why_not"]


def test_a_tier_with_constraints_off_sends_none() -> None:
    with ScriptedLLM([call("read_files", {"paths": ["~/x"]})], llama_cpp=True) as llm:
        reply = provider(llm.url, constrained=False).complete(CONVO, [READ], constraint=planner_constraint([READ], {}, words_only=False))
    assert "grammar" not in llm.requests[0].body
    assert reply.constraint["sent"] is False and "off" in reply.constraint["why_not"]


# Through whole turns: the record on the events, and replay.

@pytest.fixture
def home(home: Path, monkeypatch) -> Path:
    (home / "notes.md").write_text("alpha\nbeta\ngamma\n")
    monkeypatch.setenv("METNOS_OPENING_READS", "0")  # the model makes the steps
    return home


def ask(capsys, monkeypatch, llm: ScriptedLLM, request: str) -> dict:
    monkeypatch.setenv("METNOS_LLM_URL", llm.url)
    monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
    capsys.readouterr()
    main(["ask", request, "--json"])
    return orjson.loads(capsys.readouterr().out)


def replies_of(turn_id: str) -> list[dict]:
    from metnos.mechanisms.eventlog import EventLog

    log = EventLog(Workspace.from_env())
    try:
        return [log.mapper.to_domain_event(n).reply for n in log.notifications()
                if n.originator_id == UUID(turn_id) and n.topic.endswith("LLMReplied")]
    finally:
        log.close()


def replay(capsys, turn_id: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["replay", turn_id, "--json"])
    return code, orjson.loads(capsys.readouterr().out)


def strip_constraint_records(turn_id: str) -> int:
    """Rewrite the turn's replies as they were recorded before constraints existed (no ``constraint``)."""
    from domain.turn import Turn
    from metnos.mechanisms.eventlog import EventLog
    from metnos.mechanisms.store.records import encode_event
    from tests.support.log_surgery import replace_record

    log = EventLog(Workspace.from_env())
    stripped = 0
    try:
        for n in list(log.notifications()):
            if n.originator_id != UUID(turn_id) or not n.topic.endswith("LLMReplied"):
                continue
            event = log.mapper.to_domain_event(n)
            reply = {k: v for k, v in event.reply.items() if k != "constraint"}
            old = Turn.LLMReplied(originator_id=event.originator_id, originator_version=event.originator_version,
                                  timestamp=event.timestamp, round=event.round, reply=reply, intent_ms=event.intent_ms)
            recorder = log.recorder
            stored = log.mapper.to_stored_event(old)
            recorder.shared.write(lambda txn, n=n, stored=stored: replace_record(txn, recorder, n.id, encode_event(stored)))
            stripped += 1
    finally:
        log.close()
    return stripped


def test_a_constrained_turn_records_the_grammar_and_replays_clean_with_or_without_the_record(home: Path, capsys, monkeypatch, tmp_path) -> None:
    with ScriptedLLM([text_call("read_files", {"paths": ["~/notes.md"]}), text("alpha, beta, gamma")], llama_cpp=True) as llm:
        out = ask(capsys, monkeypatch, llm, "read ~/notes.md")
    assert out["status"] == "answered", out
    assert all("grammar" in r.body and r.body["tool_choice"] == "none" for r in llm.requests)
    replies = replies_of(out["turn_id"])
    assert [r["constraint"]["sent"] for r in replies] == [True, True]
    assert replies[0]["call_form"] == "text-json" and replies[0]["tool_calls"][0]["name"] == "read_files"
    assert replies[0]["constraint"]["digest"] != replies[1]["constraint"]["digest"]  # a call, then words only
    code, result = replay(capsys, out["turn_id"])
    assert code == 0 and result["diverged"] == 0, result

    # The same log as it would have been written before the record existed still replays clean.
    original = Workspace.from_env()
    copy = tmp_path / "copy"
    shutil.copytree(original.data_dir, copy / "data")
    shutil.copytree(original.config_dir, copy / "config")
    with monkeypatch.context() as mp:
        mp.setenv("METNOS_HOME", str(copy))
        assert strip_constraint_records(out["turn_id"]) == 2
        assert all("constraint" not in r for r in replies_of(out["turn_id"]))
        code, result = replay(capsys, out["turn_id"])
    assert code == 0 and result["diverged"] == 0, result


def test_a_turn_on_a_server_that_refuses_the_grammar_falls_back_and_says_so(home: Path, capsys, monkeypatch) -> None:
    script = [http_error(400, REFUSAL), call("read_files", {"paths": ["~/notes.md"]}), text("alpha, beta, gamma")]
    with ScriptedLLM(script, llama_cpp=True) as llm:
        out = ask(capsys, monkeypatch, llm, "read ~/notes.md")
    assert out["status"] == "answered", out
    assert ["grammar" in r.body for r in llm.requests] == [True, False, False]
    replies = replies_of(out["turn_id"])
    assert len(replies) == 2  # the refused request is no reply of the turn
    assert all(r["constraint"]["sent"] is False and "HTTP 400" in r["constraint"]["why_not"] for r in replies)
    code, result = replay(capsys, out["turn_id"])
    assert code == 0 and result["diverged"] == 0, result


def test_a_grammar_built_otherwise_now_diverges_at_the_reply(home: Path, capsys, monkeypatch) -> None:
    from metnos.runtime.turn import call_schema

    with ScriptedLLM([text_call("read_files", {"paths": ["~/notes.md"]}), text("alpha, beta, gamma")], llama_cpp=True) as llm:
        out = ask(capsys, monkeypatch, llm, "read ~/notes.md")
    assert replay(capsys, out["turn_id"])[0] == 0
    monkeypatch.setattr(call_schema, "PATH_PATTERN", r"^~/[^*?]*$")  # the round's paths held otherwise
    code, result = replay(capsys, out["turn_id"])
    assert code == 1, result
    d = result["results"][0]["divergence"]
    assert d["expected"]["type"] == "LLMReplied", d


def test_a_failed_call_the_model_sends_again_is_out_of_the_next_rounds_grammar(home: Path, capsys, monkeypatch) -> None:
    again = text_call("read_files", {"paths": ["~/missing.md"]})
    script = [again, again, text("I could not read ~/missing.md."), text("I could not read ~/missing.md.")]
    with ScriptedLLM(script, llama_cpp=True) as llm:
        out = ask(capsys, monkeypatch, llm, "read ~/missing.md")
    grammars = [r.body["grammar"] for r in llm.requests]
    # Failed, then sent again word for word (not run): from then on the grammar admits no call to it,
    # while the prompt still lists it (the prefix the server's cache holds).
    assert ["read_files" in g for g in grammars[:3]] == [True, True, False], grammars
    assert all("read_files" in r.tool_names for r in llm.requests[:3])
    assert out["status"] != "answered", out
    code, result = replay(capsys, out["turn_id"])
    assert code == 0 and result["diverged"] == 0, result
