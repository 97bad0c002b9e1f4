"""An unverified turn is never shown as an answered one, on any way in (issue 30 item 1's status).

A turn whose answer fails the check against what its steps returned ends with
status ``unverified``: the model's text in ``answer``, and ``failure`` naming
the parts found in nothing the steps returned. The outcome here is built as the
loop builds it (``check_answer``, ``turn_failure``) and rendered by each way
in's own path: ``metnos ask`` (text and --json, exit 5), the daemon's
``/api/ask``, a Telegram reply; the dashboard reads the status from the log
(``TurnFailed.status``, ``AnswerUngrounded``) and shows it as its own badge.
One real turn through ``metnos ask`` ends unverified and prints the same lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from uuid import uuid4

import orjson
import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from domain.turn import Turn
from metnos.adapters.channels.telegram import TelegramChannel
from metnos.settings.config_file import load_telegram_settings
from metnos.adapters.cli.ask_cmd import EXIT_CODES, print_outcome
from metnos.adapters.daemon.app import build_app
from metnos.services.host import DaemonHost
from metnos.adapters.cli import main
from metnos.runtime.booted import Runtime
from metnos.runtime.turn.failures import FailureKind, turn_failure
from metnos.runtime.turn.grounding import StepData, check_answer
from metnos.runtime.turn.loop import TurnOutcome
from metnos.settings.workspace import Workspace
from tests.support.fake_telegram import FakeBotAPI
from tests.support.scripted_llm import ScriptedLLM, call, text

REPO = Path(__file__).resolve().parents[2]
TOKEN = "a-daemon-token-for-this-test-only-0123456789"
REQUEST = "list the files in ~/docs"
ANSWER = "The files in ~/docs are a.txt, c.txt and d.txt."
UNMATCHED = ["c.txt", "d.txt"]
QUARANTINED = {"name": "read_files", "version": "1.0.0", "origin": "seed", "reason": "main.py: digest failed: differs from the signed one",
               "show": "metnos executors show read_files",
               "notice": "read_files 1.0.0 would have been offered for this request, but it is quarantined: main.py: digest failed."}


def _grounding() -> Any:
    found = {"ok": True, "entries": [{"path": "/home/u/docs/a.txt"}, {"path": "/home/u/docs/b.txt"}]}
    return check_answer(ANSWER, request=REQUEST, steps=[StepData("find_files", False, found)], home="/home/u")


GROUNDING = _grounding()
FAILURE = turn_failure(FailureKind.UNVERIFIED_ANSWER, GROUNDING.summary())
MESSAGE = FAILURE.message


def unverified(**extra: Any) -> TurnOutcome:
    """As the loop ends a turn whose answer does not hold up (TurnLoop._conclude)."""
    return TurnOutcome(str(uuid4()), FAILURE.status, answer=ANSWER, failure={**FAILURE.to_json(), **GROUNDING.to_json()}, steps=1, **extra)


def test_the_outcome_is_the_loops() -> None:
    assert list(GROUNDING.unmatched) == UNMATCHED and FAILURE.status == "unverified"
    assert MESSAGE.startswith("Unverified: ")


def test_ask_prints_it_on_standard_error_marked_and_exits_5(capsys: pytest.CaptureFixture[str]) -> None:
    code = print_outcome(unverified(quarantined=[QUARANTINED]), as_json=False)
    shown = capsys.readouterr()
    assert code == 5 == EXIT_CODES["unverified"]
    # Standard output holds answers only: a script reading it gets nothing to take for one.
    assert shown.out == ""
    assert shown.err.splitlines() == [
        f"metnos: unverified: {MESSAGE.removeprefix('Unverified: ')}",
        'metnos: not found in anything the steps returned: "c.txt", "d.txt"',
        "metnos: the answer as the model wrote it, unchecked:",
        ANSWER,
        f"metnos: {QUARANTINED['notice']}",
    ]


def test_ask_json_says_the_status_and_the_parts_beside_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = unverified()
    assert print_outcome(outcome, as_json=True) == 5
    out = orjson.loads(capsys.readouterr().out)
    assert out["status"] == "unverified"
    assert out["answer"] == ANSWER
    assert out["failure"]["unmatched"] == UNMATCHED and out["message"] == MESSAGE
    assert out["turn_id"] == outcome.turn_id and out["quarantined"] == []


def test_an_answered_turn_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = TurnOutcome(str(uuid4()), "answered", answer="sunday", steps=1)
    assert print_outcome(outcome, as_json=False) == 0
    assert capsys.readouterr().out == "sunday\n"
    print_outcome(outcome, as_json=True)
    out = orjson.loads(capsys.readouterr().out)
    assert (out["answer"], out["message"], out["quarantined"]) == ("sunday", "sunday", [])


def test_the_readme_documents_every_exit_code() -> None:
    readme = (REPO / "README.md").read_text()
    for status, code in EXIT_CODES.items():
        assert re.search(rf"^\| {code} \| `{status}` \|", readme, re.M), f"README's exit codes lack {code} ({status})"


class OutcomeHost(DaemonHost):
    """The daemon's host with its turn replaced by a given outcome: the rendering is what is tested."""

    def __init__(self, runtime: Any, outcome: TurnOutcome) -> None:
        super().__init__(runtime, env={})
        self.outcome = outcome
        self.outbox = None  # no log under this host: nothing waits to go out

    def ask(self, text: str, **_: Any) -> TurnOutcome:
        return self.outcome

    def pair(self, channel: str, address: str) -> str:
        return "host"


def test_the_daemon_api_gives_it_as_ask_json_does() -> None:
    outcome = unverified(quarantined=[QUARANTINED])
    with TestClient(build_app(OutcomeHost(None, outcome), TOKEN, mounts=[])) as client:
        reply = client.post("/api/ask", json={"text": REQUEST}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert reply.status_code == 200, reply.text
    out = reply.json()
    assert out["status"] == "unverified" and out["answer"] == ANSWER
    assert out["message"] == MESSAGE and out["failure"]["unmatched"] == UNMATCHED
    assert out["quarantined"] == [QUARANTINED]


@pytest.fixture
def logged(home: Path) -> Iterator[tuple[Runtime, str]]:
    """A real log holding one turn that ended unverified, as the loop records it (TurnFailed, status unverified)."""
    runtime = Runtime.boot(Workspace.from_env(), birth=False)
    at = datetime.now(timezone.utc)
    turn = Turn.start(id=uuid4(), at=at, text=REQUEST, actor="user", channel="cli", mode="local",
                      settings={}, runtime_version="test")
    turn.record(Turn.AnswerUngrounded, at=at, round=2, text=ANSWER, unmatched=list(UNMATCHED), exactness="")
    turn.record(Turn.TurnFailed, at=at, kind="unverified_answer", final_kind="unverified", message=MESSAGE, steps=1, status="unverified")
    runtime.log.save(turn)
    runtime.refresh()
    try:
        yield runtime, str(turn.id)
    finally:
        runtime.close()


def test_the_dashboard_shows_the_status_from_the_log_as_its_own(logged: tuple[Runtime, str]) -> None:
    runtime, turn_id = logged
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "text/html"}
    with TestClient(build_app(DaemonHost(runtime, env={}), TOKEN, mounts=[])) as client:
        listed = client.get("/api/turns", headers=headers).json()
        timeline = client.get("/", headers=headers).text
        page = client.get(f"/turns/{turn_id}", headers=headers).text
        css = client.get("/static/dashboard.css", headers=headers).text
    assert [t["status"] for t in listed if t["id"] == turn_id] == ["unverified"]
    row = timeline[timeline.index(f'href="/turns/{turn_id}"') - 400:timeline.index(f'href="/turns/{turn_id}"')]
    assert '<span class="badge unverified">unverified</span>' in row and "answered" not in row
    assert '<span class="badge unverified" id="turn-status">unverified</span>' in page
    outcome = page[page.index('id="outcome"'):]
    outcome = outcome[:outcome.index("</section>")]
    assert f"<strong>Unverified</strong>: {escape(MESSAGE.removeprefix('Unverified: '))}" in outcome
    assert '<code class="unmatched">c.txt</code>, <code class="unmatched">d.txt</code>' in outcome
    assert f'unchecked:</p><pre class="unchecked">{ANSWER}</pre>' in outcome
    # A badge of its own: neither an answered one nor a failed one.
    assert re.search(r"\.badge\.unverified\s*\{[^}]*background", css)


def test_a_telegram_reply_marks_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token, chat = "123456:TEST-not-a-real-token", 4242
    monkeypatch.setenv("METNOS_TEST_TELEGRAM_TOKEN", token)
    config = tmp_path / "config.toml"
    with FakeBotAPI(token) as bot:
        config.write_text(f'[telegram]\ntoken_env = "METNOS_TEST_TELEGRAM_TOKEN"\nallowed_chats = [{chat}]\n'
                          f'base_url = "{bot.url}"\npoll_timeout_s = 1\n')
        host = OutcomeHost(None, unverified(quarantined=[QUARANTINED]))
        channel = TelegramChannel(host, load_telegram_settings(config))
        channel.start()
        try:
            bot.user_says(chat, REQUEST)
            reply = bot.wait_for("sendMessage", lambda p: p["chat_id"] == chat).params["text"]
        finally:
            channel.stop()
    assert reply == "\n".join([
        f"metnos: unverified: {MESSAGE.removeprefix('Unverified: ')}",
        'not found in anything the steps returned: "c.txt", "d.txt"',
        "",
        "the answer as the model wrote it, unchecked:",
        ANSWER,
        "",
        f"metnos: {QUARANTINED['notice']}",
    ])


def test_a_real_unverified_turn_prints_the_same_lines(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (home / "docs").mkdir()
    for name in ("a.txt", "b.txt"):
        (home / "docs" / name).write_text("x")
    # The model's listing is the turn's one read: no data it asked for twice stands in for its answer.
    monkeypatch.setenv("METNOS_OPENING_READS", "0")
    with ScriptedLLM([call("find_files", {"base_path": "~/docs"}), text(ANSWER), text(ANSWER)]) as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        code = main(["ask", REQUEST, "--no-cache"])
        shown = capsys.readouterr()
    assert code == 5 and shown.out == ""
    lines = shown.err.splitlines()
    start = lines.index("metnos: the answer as the model wrote it, unchecked:")
    assert lines[start - 2].startswith("metnos: unverified: the answer does not hold up against what the steps returned")
    assert lines[start - 1] == 'metnos: not found in anything the steps returned: "c.txt", "d.txt"'
    assert lines[start + 1] == ANSWER
