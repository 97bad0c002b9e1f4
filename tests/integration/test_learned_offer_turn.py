"""``[turn] offer = "learned"`` in a real turn (issue 30 item 6): the shipped classifier brings an executor
the rules miss, the ranking records it with the model's digest, and the turn replays on the same path.
A scripted model server on 127.0.0.1, executors in bubblewrap, the log on disk."""

from __future__ import annotations

from pathlib import Path

from metnos.adapters.cli import main
from metnos.runtime.step.learned_offer import shipped
from tests.integration.test_modes import configure, replays_clean
from tests.integration.test_side_effect_gate import events_of, kind
from tests.integration.test_tier_roles import ask_configured, tiers
from tests.support.scripted_llm import ScriptedLLM, call, text

# No word of it is a tag or a verb the rules read; the classifier names get_now.
REQUEST = "how late is it"


def offered_tools(capsys, monkeypatch, offer: str) -> tuple[dict, list[dict], list[str]]:  # noqa: ANN001
    with ScriptedLLM([call("get_now", {}), text("It is the hour the clock gave.")]) as wise:
        configure(f'[turn]\noffer = "{offer}"\n' + tiers(wise=wise.url))
        code, out = ask_configured(capsys, monkeypatch, REQUEST)
        proposer = wise.requests[0]
    assert code in (0, 1), out
    return out, events_of(capsys, out["turn_id"]), proposer.tool_names


def test_the_learned_offer_brings_what_the_rules_miss_and_replays(home: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.delenv("METNOS_ENGINE_OFFER", raising=False)
    # The control: the rules alone offer no clock for it.
    _, _, tools = offered_tools(capsys, monkeypatch, "shortlist")
    assert "get_now" not in tools

    out, events, tools = offered_tools(capsys, monkeypatch, "learned")
    assert "get_now" in tools
    assert out["status"] == "answered" and out["answer"] == "It is the hour the clock gave.", out
    [ranked] = [e["state"]["ranking"] for e in events if kind(e) == "PrefilterRanked"]
    assert ranked["offer"] == {"asked": "learned", "made": "learned", "model": shipped().digest}
    assert next(c for c in ranked["candidates"] if c["name"] == "get_now")["via"] == "learned"
    replays_clean(capsys, out["turn_id"])


# A question about a job's next run: the rules read "run" and bring run_commands; the change reading takes it back.
QUESTION = "when does the nightly sync job run next?"


def test_the_gated_offer_withholds_a_side_effect_from_a_request_read_as_changing_nothing_and_says_so(
        home: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.delenv("METNOS_ENGINE_OFFER", raising=False)
    replies = [text("I cannot tell: I have no tool for the jobs."), text("I cannot tell: I have no tool for the jobs.")]
    with ScriptedLLM(list(replies)) as wise:
        configure('[turn]\noffer = "shortlist"\n' + tiers(wise=wise.url))
        ask_configured(capsys, monkeypatch, QUESTION)
        assert "run_commands" in wise.requests[0].tool_names
    with ScriptedLLM(list(replies)) as wise:
        configure('[turn]\noffer = "gated"\n' + tiers(wise=wise.url))
        code, out = ask_configured(capsys, monkeypatch, QUESTION)
        assert "run_commands" not in wise.requests[0].tool_names
    events = events_of(capsys, out["turn_id"])
    [ranked] = [e["state"]["ranking"] for e in events if kind(e) == "PrefilterRanked"]
    assert {"name": "run_commands", "reason": "the learned offer reads the request as changing nothing"} in ranked["withheld"]
    assert ranked["offer"] == {"asked": "gated", "made": "gated", "model": shipped().digest}
    assert out["withheld_changes"] == ["run_commands"]
    assert out["status"] != "answered", out
    replays_clean(capsys, out["turn_id"])
    # In words, on the terminal: which executor, why, and how to ask for the change.
    capsys.readouterr()
    with ScriptedLLM(list(replies)) as wise:
        configure('[turn]\noffer = "gated"\n' + tiers(wise=wise.url))
        main(["ask", QUESTION, "--no-cache"])
    said = capsys.readouterr()
    assert "not offered: run_commands; the request reads as changing nothing" in said.out + said.err
