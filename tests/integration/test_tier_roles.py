"""Issue 20 item 2: the roles beside the proposer on their own tiers, against real model servers on 127.0.0.1.

Fillers and the scratchpad summariser on the fast tier, the intent extractor
on the middle tier: each tier is its own scripted server (tests/support/
scripted_llm.py), so each test sees which server each role reached and what
it was sent; executors run in bubblewrap; every turn is replayed from the log.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from metnos.adapters.cli import main
from tests.integration.test_modes import configure, plan, replays_clean, shown
from tests.integration.test_side_effect_gate import events_of, kind
from tests.support.scripted_llm import ScriptedLLM, call, text

DEAD_URL = "http://127.0.0.1:9"  # the discard port: nothing answers there


def tiers(**servers: str) -> str:
    """[llm.tiers.*] pointing each named tier at its own server."""
    return "".join(f'\n[llm.tiers.{tier}]\nprovider = "openai"\nurl = "{url}"\nmodel = "{tier}-model"\n' for tier, url in servers.items())


def ask_configured(capsys, monkeypatch, *argv: str) -> tuple[int, dict]:
    for var in ("METNOS_LLM_URL", "METNOS_LLM_MODEL", "METNOS_LLM_PROVIDER"):
        monkeypatch.delenv(var, raising=False)
    capsys.readouterr()
    code = main(["ask", *argv, "--json", "--no-cache"])
    return code, orjson.loads(capsys.readouterr().out)


def test_an_online_plan_leaves_fillers_that_the_fast_tier_writes_once_their_step_ran(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "trip.md").write_text("Train to Turin at 9:40. Hotel Roma, room 12. Dinner with Elena at 20:00.\n")
    two = plan([("read_files", {"paths": ["~/notes/trip.md"]}),
                ("write_files", {"files": [{"path": "~/summary.md", "content": "${FILLER: a one-line summary of {{step1.entries.0.content}}}"}]})],
               "Saved. ${FILLER: say in a few words what {{step1.entries.0.content}} is about}")
    with ScriptedLLM([text(two)]) as wise, \
            ScriptedLLM([text("Turin by train at 9:40, Hotel Roma, dinner with Elena at 20:00."), text("It is your trip to Turin.")]) as fast:
        configure('[runtime]\nmode = "online"\n' + tiers(fast=fast.url, wise=wise.url))  # fillers are on by default
        code, out = ask_configured(capsys, monkeypatch, "summarise ~/notes/trip.md into ~/summary.md", "--yes")
        planned, filled = wise.requests[0], fast.requests
    assert code == 0, out
    assert (home / "summary.md").read_text() == "Turin by train at 9:40, Hotel Roma, dinner with Elena at 20:00."
    assert out["answer"] == "Saved. It is your trip to Turin."
    # The planner was told how to leave a filler; the fast tier got each with the step's data, in a context of its own.
    assert "${FILLER:" in planned.messages[0]["content"]
    assert len(filled) == 2 and all(r.tool_names == [] for r in filled)
    assert "Dinner with Elena" in filled[0].messages[-1]["content"] and "one-line summary" in filled[0].messages[-1]["content"]
    assert "Train to Turin" not in planned.messages[-1]["content"]
    events = events_of(capsys, out["turn_id"])
    asked = [(e["state"]["role"], e["state"]["tier"]) for e in events if kind(e) == "LLMAsked"]
    assert asked == [("online", "wise"), ("filler", "fast"), ("filler", "fast")]
    written = [e["state"] for e in events if kind(e) == "FillerWritten"]
    assert [(w["step"], w["where"], w["tier"]) for w in written] == [(2, "args.files.0.content", "fast"), (None, "answer", "fast")]
    assert all(w["model"] == "scripted-model" for w in written) and all(r.body["model"] == "fast-model" for r in filled)
    [proposed] = [e["state"] for e in events if kind(e) == "StepProposed" and e["state"]["executor"] == "write_files"]
    assert proposed["args"]["files"][0]["content"].startswith("Turin by train")
    said = shown(capsys, out["turn_id"])
    assert "filler for step 2 args.files.0.content (fast, scripted-model): 'Turin by train" in said
    assert "asked the fast tier as filler" in said and "sent (user): The user's request: summarise" in said
    replays_clean(capsys, out["turn_id"])


def test_with_fillers_off_the_planner_is_not_told_of_them(home: Path, capsys, monkeypatch) -> None:
    with ScriptedLLM([text(plan([("get_now", {})], "It is {{step1.content}}."))]) as wise:
        configure('[runtime]\nmode = "online"\nfillers = false\n' + tiers(wise=wise.url))
        code, out = ask_configured(capsys, monkeypatch, "what time is it?")
        prompt = wise.requests[0].messages[0]["content"]
    assert code == 0 and out["answer"].startswith("It is "), out
    assert "FILLER" not in prompt


def summary_with_a_failing_filler(home: Path, capsys, monkeypatch, reference: str, gave_up: str):
    """An online plan that reads trip.md and writes a summary through a filler on ``reference``,
    the fast tier unreachable; the planner gives up in its recovery. (code, out, the recovery's last message)."""
    (home / "notes").mkdir()
    (home / "notes" / "trip.md").write_text("Train at 9:40.\n")
    two = plan([("read_files", {"paths": ["~/notes/trip.md"]}),
                ("write_files", {"files": [{"path": "~/summary.md", "content": "${FILLER: a summary of {{%s}}}" % reference}]})],
               "Saved.")
    with ScriptedLLM([text(two), text(orjson.dumps({"steps": [], "answer": gave_up}).decode())]) as wise:
        configure('[runtime]\nmode = "online"\nfillers = true\n' + tiers(fast=DEAD_URL, wise=wise.url))
        code, out = ask_configured(capsys, monkeypatch, "summarise ~/notes/trip.md into ~/summary.md", "--yes")
        return code, out, wise.requests[1].messages[-1]["content"]


def test_a_filler_that_cannot_be_written_fails_its_step_and_writes_nothing(home: Path, capsys, monkeypatch) -> None:
    code, out, recovery = summary_with_a_failing_filler(home, capsys, monkeypatch, "step1.entries.3.content",
                                                        "I could not write the summary.")
    assert not (home / "summary.md").exists()
    assert code == 1 and out["failure"]["kind"] == "step_failed" and "could not be written" in out["failure"]["message"], out
    events = events_of(capsys, out["turn_id"])
    [written] = [e["state"] for e in events if kind(e) == "FillerWritten"]
    assert written["text"] is None and "lacks" in written["problem"] and written["step"] == 2
    # The recovery call is told which step could not be written and why.
    assert "could not be written" in recovery and "lacks" in recovery
    assert not [e for e in events if kind(e) == "StepInvoked" and e["state"]["executor"] == "write_files"]
    replays_clean(capsys, out["turn_id"])


def test_a_filler_whose_model_is_unreachable_names_the_tier_and_runs_no_step(home: Path, capsys, monkeypatch) -> None:
    _, out, _ = summary_with_a_failing_filler(home, capsys, monkeypatch, "step1.entries.0.content",
                                              "The writer could not be reached, so nothing was saved.")
    assert not (home / "summary.md").exists()
    events = events_of(capsys, out["turn_id"])
    [written] = [e["state"] for e in events if kind(e) == "FillerWritten"]
    assert written["text"] is None and "could not be asked" in written["problem"] and written["tier"] == "fast"
    assert out["status"] == "failed" and out["failure"]["kind"] == "step_failed", out
    assert [e["state"]["error_type"] for e in events if kind(e) == "LLMFailed"]
    replays_clean(capsys, out["turn_id"])


def test_the_intent_extractor_on_the_middle_tier_brings_what_the_rules_miss_and_no_unasked_side_effect(
        home: Path, capsys, monkeypatch) -> None:
    request = "give me the hour"
    # The extractor completes the shortlist; the whole catalogue (the default offer) would hold get_now anyway.
    monkeypatch.setenv("METNOS_ENGINE_OFFER", "shortlist")
    # The rules alone offer nothing for it (the control: this test would pass vacuously otherwise).
    with ScriptedLLM([text("I cannot tell.")]) as wise:
        configure(tiers(wise=wise.url))
        _, out = ask_configured(capsys, monkeypatch, request)
    [ranked] = [e["state"]["ranking"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "PrefilterRanked"]
    assert "get_now" not in [c["name"] for c in ranked["candidates"]]

    with ScriptedLLM([text('{"tools": ["get_now", "delete_files", "make_coffee"]}')]) as middle, \
            ScriptedLLM([call("get_now", {}), text("It is the hour the clock gave.")]) as wise:
        configure('[runtime]\nintent = "model"\n' + tiers(middle=middle.url, wise=wise.url))
        code, out = ask_configured(capsys, monkeypatch, request)
        extractor, proposer = middle.requests[0], wise.requests[0]
    assert code == 0 and out["answer"] == "It is the hour the clock gave.", out
    # Its own context: the catalogue's names and summaries and the request, no tools.
    assert extractor.tool_names == [] and "get_now:" in extractor.messages[0]["content"]
    assert extractor.messages[-1]["content"] == request
    assert "get_now" in proposer.tool_names and "delete_files" not in proposer.tool_names
    events = events_of(capsys, out["turn_id"])
    [extracted] = [e["state"] for e in events if kind(e) == "IntentExtracted"]
    assert extracted["tools"] == ["get_now", "delete_files"] and extracted["tier"] == "middle"
    assert extractor.body["model"] == "middle-model" and "make_coffee" in extracted["problem"]
    [ranked] = [e["state"]["ranking"] for e in events if kind(e) == "PrefilterRanked"]
    assert {"name": "get_now", "via": "intent"}.items() <= next(c for c in ranked["candidates"] if c["name"] == "get_now").items()
    # The model cannot bring in a side effect the request does not name.
    assert {"name": "delete_files", "reason": "side effects the request does not ask for"} in ranked["withheld"]
    assert [(e["state"]["role"], e["state"]["tier"]) for e in events if kind(e) == "LLMAsked"][0] == ("intent", "middle")
    replays_clean(capsys, out["turn_id"])


def test_an_unreachable_intent_extractor_leaves_the_rules_shortlist(home: Path, capsys, monkeypatch) -> None:
    with ScriptedLLM([call("get_now", {}), text("It is the hour the clock gave.")]) as wise:
        configure(tiers(middle=DEAD_URL, wise=wise.url))
        # Switched on for this one turn from the command line.
        code, out = ask_configured(capsys, monkeypatch, "what time is it?", "--set", "intent=model")
    assert code == 0 and out["answer"] == "It is the hour the clock gave.", out
    [extracted] = [e["state"] for e in events_of(capsys, out["turn_id"]) if kind(e) == "IntentExtracted"]
    assert extracted["tools"] == [] and "could not be asked" in extracted["problem"]
    assert "intent extractor (middle, no model): nothing; the intent extractor could not be asked" in shown(capsys, out["turn_id"])
    replays_clean(capsys, out["turn_id"])


def test_a_spilled_observation_gets_a_gist_from_the_fast_tier(home: Path, capsys, monkeypatch) -> None:
    lines = [f"2026-11-{d:02d} spent {d * 3} EUR on groceries" for d in range(1, 26)] * 8
    (home / "ledger.txt").write_text("\n".join(lines) + "\nTOTAL for November: 975 EUR\n")
    gist = "A November grocery ledger, one line a day; its last line gives the total: 975 EUR."
    with ScriptedLLM([call("read_files", {"paths": ["~/ledger.txt"]}), text("975 EUR")]) as wise, ScriptedLLM([text(gist)]) as fast:
        configure('[runtime]\nsummarise_spills = true\n\n[turn]\nopening_reads = false\n' + tiers(fast=fast.url, wise=wise.url))
        code, out = ask_configured(capsys, monkeypatch, "what is the November total in ~/ledger.txt?")
        summarised, answered = fast.requests[0], wise.requests[1]
    assert code == 0, out
    assert summarised.tool_names == [] and "TOTAL for November: 975 EUR" in summarised.messages[-1]["content"]
    # The proposer sees the gist beside the preview, and the spill stays readable.
    tool_result = next(m for m in reversed(answered.messages) if m["role"] == "tool")["content"]
    assert gist in tool_result and "scratchpad_id" in tool_result
    events = events_of(capsys, out["turn_id"])
    [spill] = [e["state"] for e in events if kind(e) == "SpillSummarised"]
    assert spill["gist"] == gist and spill["tier"] == "fast" and spill["step"] == 1
    [observed] = [e["state"]["observation"] for e in events if kind(e) == "ObservationRecorded"]
    assert observed["gist"] == gist and observed["scratchpad_id"] == spill["scratchpad_id"]
    assert "step 1: summariser (fast, scripted-model): 'A November grocery ledger" in shown(capsys, out["turn_id"])
    replays_clean(capsys, out["turn_id"])


def test_an_unreachable_summariser_leaves_the_preview_alone(home: Path, capsys, monkeypatch) -> None:
    (home / "ledger.txt").write_text("x" * 9000 + "\nTOTAL 975 EUR\n")
    with ScriptedLLM([call("read_files", {"paths": ["~/ledger.txt"]}), text("975 EUR")]) as wise:
        configure('[runtime]\nsummarise_spills = true\n\n[turn]\nopening_reads = false\n' + tiers(fast=DEAD_URL, wise=wise.url))
        code, out = ask_configured(capsys, monkeypatch, "what is the total in ~/ledger.txt?")
    assert code == 0, out
    events = events_of(capsys, out["turn_id"])
    [spill] = [e["state"] for e in events if kind(e) == "SpillSummarised"]
    assert spill["gist"] is None and "could not be asked" in spill["problem"]
    [observed] = [e["state"]["observation"] for e in events if kind(e) == "ObservationRecorded"]
    assert "gist" not in observed and "summary" in observed
    replays_clean(capsys, out["turn_id"])


def test_a_runtime_key_set_for_one_turn_is_checked_like_config_toml(home: Path, capsys, monkeypatch) -> None:
    capsys.readouterr()
    assert main(["ask", "what time is it?", "--set", "intent=maybe"]) == 2
    err = capsys.readouterr().err
    assert "--set intent=maybe: [runtime] intent: Input should be 'rules' or 'model'" in err
    assert main(["ask", "what time is it?", "--set", "judge.enabeld=true"]) == 2
    assert "judge.enabeld" in capsys.readouterr().err
