"""Issue 37 item 1 and 2: a schedule the planner makes in a turn is shown back, on every way in.

A ``metnos ask`` turn (its terminal approver, or --yes) and a daemon ``/api/ask``
turn (its approvals inbox) show the schedule the model made with its cron and
next three firings before it is saved; a no saves nothing. Words only the model
can read are read by the turn's model (a side call recorded on the turn, so the
turn replays with no model), and croniter judges what it answered.
"""

from __future__ import annotations

import builtins
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.runtime.booted import Runtime
from metnos.settings.workspace import Workspace
from tests.support.cli_process import run, wait_for
from tests.support.daemon_process import RunningDaemon, daemon, daemon_llm  # noqa: F401 - fixtures
from tests.support.scripted_llm import ScriptedLLM, call, text

pytestmark = pytest.mark.bwrap

TIMED = {"executor": "get_now", "cron": "every morning at 8", "channel": "none"}
# Words no rule and no dateparser reads: only the model can.
BOOK_CLUB = "whenever the fortnightly book club meets, friday evenings at eight"


class _Terminal:
    """A standard input that is a terminal, for the approver to ask at."""

    closed = False

    def isatty(self) -> bool:
        return True


def _ask(capsys, monkeypatch, script: list, *argv: str, answers: list[str] | None = None) -> tuple[dict, list[str]]:
    prompts: list[str] = []
    if answers is not None:
        monkeypatch.setattr(sys, "stdin", _Terminal())
        said = iter(answers)

        def answer(prompt: str = "") -> str:
            prompts.append(capsys.readouterr().err)
            return next(said)

        monkeypatch.setattr(builtins, "input", answer)
    with ScriptedLLM(script) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        main(["ask", *argv, "--json"])
        out = orjson.loads(capsys.readouterr().out)
    return out, prompts


def _events(kind: str | None = None) -> list[Any]:
    runtime = Runtime.boot(Workspace.from_env())
    try:
        events = [e for _, e in runtime.log.domain_events()]
    finally:
        runtime.close()
    return [e for e in events if kind is None or type(e).__name__ == kind]


def _confirmed_then_created(events: list[Any]) -> tuple[Any, Any]:
    [made] = [e for e in events if type(e).__name__ == "ScheduleCreated" and e.owner == "user"]
    [confirmed] = [e for e in events if type(e).__name__ == "ScheduleConfirmed"]
    assert confirmed.originator_id == made.originator_id
    return confirmed, made


def test_a_schedule_a_cli_turn_makes_is_shown_at_the_terminal_and_saved_on_a_yes(home: Path, capsys, monkeypatch) -> None:
    out, prompts = _ask(capsys, monkeypatch, [call("schedule_recurring", TIMED), text("Scheduled.")],
                        "tell me the time every morning at 8", answers=["y"])
    assert out["status"] == "answered", out
    confirmed, made = _confirmed_then_created(_events())
    assert made.cron == "0 8 * * *" and confirmed.by == "user:prompt" and len(confirmed.next_fires) == 3
    # Asked before it was saved: what the terminal showed is the cron and the next three firings the log confirms.
    [shown] = prompts
    assert "0 8 * * *" in shown and all(fire in shown for fire in confirmed.next_fires), shown


def test_under_yes_the_confirmation_is_given_and_recorded_as_given_by_the_flag(home: Path, capsys, monkeypatch) -> None:
    out, _ = _ask(capsys, monkeypatch, [call("schedule_recurring", TIMED), text("Scheduled.")],
                  "tell me the time every morning at 8", "--yes")
    assert out["status"] == "answered", out
    confirmed, made = _confirmed_then_created(_events())
    assert (made.cron, confirmed.by, len(confirmed.next_fires)) == ("0 8 * * *", "flag:--yes", 3)


def test_a_no_at_the_terminal_saves_nothing(home: Path, capsys, monkeypatch) -> None:
    refused = [call("schedule_recurring", TIMED), text("Not scheduled.")] * 2
    out, prompts = _ask(capsys, monkeypatch, refused, "tell me the time every morning at 8", answers=["n", "n"])
    assert prompts and "0 8 * * *" in prompts[0]
    assert not _events("ScheduleCreated") and not _events("ScheduleConfirmed")
    [error, *_] = [e.observation["error"] for e in _events("BuiltinCalled")]
    assert error["kind"] == "NotConfirmed" and "answered by user:prompt" in error["message"], out


def test_words_only_the_model_reads_make_the_schedule_in_a_turn_and_the_turn_replays(home: Path, capsys, monkeypatch) -> None:
    script = [call("schedule_recurring", {**TIMED, "cron": BOOK_CLUB}), text('{"cron": "0 20 * * 5", "once": false}'), text("Scheduled.")]
    out, _ = _ask(capsys, monkeypatch, script, f"tell me the time {BOOK_CLUB}", "--yes")
    assert out["status"] == "answered", out
    confirmed, made = _confirmed_then_created(_events())
    assert made.cron == "0 20 * * 5" and len(confirmed.next_fires) == 3
    [observed] = [e.observation for e in _events("BuiltinCalled")]
    assert observed["ok"] is True and observed["said"] == BOOK_CLUB and observed["cron"] == "0 20 * * 5"
    # Recorded as the turn's other model calls are: asked (with the words), replied.
    turn = [e for e in _events() if str(e.originator_id) == out["turn_id"]]
    [asked] = [e for e in turn if type(e).__name__ == "LLMAsked" and e.role == "schedule_words"]
    assert BOOK_CLUB in asked.sent[1]["text"]
    assert sum(type(e).__name__ == "LLMReplied" for e in turn) == 3
    # Replayed from the log (no model server is running now): the same path, the same events.
    capsys.readouterr()
    code = main(["replay", out["turn_id"], "--json"])
    replayed = orjson.loads(capsys.readouterr().out)
    assert code == 0 and replayed["diverged"] == 0, replayed


def test_a_cron_the_model_makes_up_that_croniter_refuses_is_refused_with_what_it_said(home: Path, capsys, monkeypatch) -> None:
    script = [call("schedule_recurring", {**TIMED, "cron": BOOK_CLUB}), text('{"cron": "0 25 * * 5", "once": false}'),
              text("Not scheduled.")]
    out, _ = _ask(capsys, monkeypatch, script, f"tell me the time {BOOK_CLUB}", "--yes")
    assert not _events("ScheduleCreated")
    [error] = [e.observation["error"] for e in _events("BuiltinCalled")]
    assert "the model read" in error["message"] and "'0 25 * * 5', which is not a valid cron" in error["message"], error
    capsys.readouterr()
    code = main(["replay", out["turn_id"], "--json"])
    assert code == 0 and orjson.loads(capsys.readouterr().out)["diverged"] == 0


def _schedule_events(daemon: RunningDaemon) -> list[dict]:
    done = run(["events", "--json", "--topic", "Schedule"], daemon.env)
    assert done.returncode == 0, done.stderr
    return [e for e in (orjson.loads(line) for line in done.stdout.splitlines()) if "ScheduleCreated" in e["topic"]
            and e["state"]["owner"] == "user" or "ScheduleConfirmed" in e["topic"]]


@pytest.mark.parametrize("yes", [True, False], ids=["yes", "no"])
def test_a_schedule_an_http_turn_makes_waits_in_the_inbox_and_only_a_yes_saves_it(
        daemon: RunningDaemon, daemon_llm: ScriptedLLM, yes: bool) -> None:
    # A turn told no may try once more: spare rounds keep the script ahead, dropped at the end.
    daemon_llm.add(call("schedule_recurring", TIMED), text("Scheduled." if yes else "Not scheduled."),
                   call("schedule_recurring", TIMED), text("Not scheduled."))
    before = _schedule_events(daemon)
    result: dict = {}
    with daemon.client() as client:
        asking = threading.Thread(target=lambda: result.update(client.post("/api/ask", json={"text": "tell me the time every morning at 8"}).json()))
        asking.start()
        [shown] = wait_for(lambda: client.get("/api/approvals").json(), timeout=60, what="the schedule to be shown")
        assert shown["executor"] == "schedule_recurring" and shown["args"]["cron"] == "0 8 * * *"
        assert len(shown["args"]["next_fires"]) == 3
        # Shown before it is saved: nothing in the log yet.
        assert _schedule_events(daemon) == before
        assert client.post(f"/api/approvals/{shown['id']}", json={"approve": yes}).status_code == 200
        if not yes:
            again = wait_for(lambda: [p for p in client.get("/api/approvals").json() if p["id"] != shown["id"]] or not asking.is_alive(),
                             timeout=60, what="the turn to end or show the schedule again")
            if again is not True:
                client.post(f"/api/approvals/{again[0]['id']}", json={"approve": False})
        asking.join(timeout=60)
        events = client.get(f"/api/turns/{result['turn_id']}").json()["events"]
    daemon_llm._state.script = daemon_llm._state.script[: len(daemon_llm._state.script) - daemon_llm.remaining]
    [called, *_] = [e["state"]["observation"] for e in events if e["type"] == "BuiltinCalled"]
    made = _schedule_events(daemon)[len(before):]
    if yes:
        assert result["status"] == "answered" and called["ok"] is True, result
        created, confirmed = made
        assert "ScheduleCreated" in created["topic"] and created["state"]["cron"] == "0 8 * * *"
        assert "ScheduleConfirmed" in confirmed["topic"] and confirmed["aggregate_id"] == created["aggregate_id"] == called["schedule_id"]
        assert confirmed["state"]["by"] == "http:user" and confirmed["state"]["next_fires"] == shown["args"]["next_fires"]
    else:
        assert made == [] and called["error"]["kind"] == "NotConfirmed", called
        assert "answered by http:user" in called["error"]["message"]
