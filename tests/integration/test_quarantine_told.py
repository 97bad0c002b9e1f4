"""Issue 30 item 5: a quarantined executor the request would have been offered is told, on every way in.

An executor's main.py is changed after signing, so the real loader quarantines
it at boot (its digest no longer matches the signed one). A request that would
have been offered it gets an outcome that says which executor, why, and the
command that shows it: ``metnos ask`` (text and --json), the daemon's API and
the dashboard's turn page, a Telegram reply; an MCP client that calls it by
name is told the same instead of "no such executor". The turn records the fact
(``QuarantinedNotOffered``), and a replay reproduces it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from mcp import Client

from metnos.services.host import RuntimeHost
from metnos.adapters.channels.telegram import TelegramChannel
from metnos.settings.config_file import load_telegram_settings
from metnos.adapters.cli import main
from metnos.runtime.booted import Runtime
from tests.support.mcp_served import mcp_over_http
from metnos.settings.workspace import Workspace
from tests.support.cli_process import metnos_env
from tests.support.daemon_process import start_daemon
from tests.support.fake_telegram import FakeBotAPI
from tests.support.scripted_llm import ScriptedLLM, text

pytestmark = pytest.mark.bwrap

REQUEST = "read ~/notes/a.md and tell me what it says"
SHOW = "metnos executors show read_files"


def tamper(name: str) -> None:
    """Change a signed seed's code: the loader's digest check quarantines it at the next boot."""
    main_py = Workspace.from_env().executors_origin_dir("seed") / name / "1.0.0" / "main.py"
    main_py.write_text(main_py.read_text() + "\nimport os  # tampered\n")


@pytest.fixture
def tampered(home: Path) -> Path:
    (home / "notes").mkdir()
    (home / "notes" / "a.md").write_text("alpha\n")
    tamper("read_files")
    return home


def scripted(monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM) -> None:
    monkeypatch.setenv("METNOS_LLM_URL", llm.url)
    monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")


def ask_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["ask", *argv, "--json", "--no-cache"])
    return code, orjson.loads(capsys.readouterr().out)


def turn_events(capsys: pytest.CaptureFixture[str], turn_id: str) -> list[dict[str, Any]]:
    capsys.readouterr()
    main(["events", "--json", "--aggregate", turn_id])
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def told_in(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [e["state"]["executors"] for e in events if e["topic"].endswith(".QuarantinedNotOffered")]


def assert_names_read_files(told: dict[str, Any]) -> None:
    """Which (read_files 1.0.0), why (the loader's reason: the digest), and the command that shows it."""
    assert (told["name"], told["version"], told["origin"]) == ("read_files", "1.0.0", "seed")
    assert told["reason"].startswith("main.py: digest failed: differs from the signed one"), told
    assert told["show"] == SHOW
    assert told["notice"].startswith("read_files 1.0.0 would have been offered for this request, but it is quarantined: ")
    assert told["reason"] in told["notice"] and f"`{SHOW}`" in told["notice"]


def test_ask_says_which_executor_is_quarantined_why_and_the_command(tampered: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLM([text("I could not read that file."), text("I could not read that file.")]) as llm:
        scripted(monkeypatch, llm)
        code, out = ask_json(capsys, REQUEST)
        offered = [t["function"]["name"] for t in llm.requests[0].body.get("tools", [])]
        capsys.readouterr()
        main(["ask", REQUEST, "--no-cache"])
        shown = capsys.readouterr()
    assert "read_files" not in offered  # quarantined: never offered, never run
    [told] = out["quarantined"]
    assert_names_read_files(told)
    # In words, on standard error: the answer on standard output stays the answer alone.
    assert f"metnos: {told['notice']}" in shown.err.splitlines()
    assert told["notice"] not in shown.out

    [recorded] = told_in(turn_events(capsys, out["turn_id"]))
    assert recorded == [{k: told[k] for k in ("name", "version", "origin", "check", "reason")}]
    assert told["check"] == "digest"

    capsys.readouterr()
    main(["turns", "show", out["turn_id"]])
    assert f"quarantined, not offered: read_files 1.0.0 ({told['reason']})" in capsys.readouterr().out

    # The command the notice names exists and shows the same reason.
    capsys.readouterr()
    assert main(["executors", "show", "read_files"]) == 0
    listing = capsys.readouterr().out
    assert "quarantined since" in listing and f"reason: {told['reason']}" in listing

    # Replay runs the loop again on the same catalogue: the same event, the same path.
    capsys.readouterr()
    assert main(["replay", out["turn_id"], "--json"]) == 0
    replayed = orjson.loads(capsys.readouterr().out)
    assert replayed["diverged"] == 0 and replayed["results"][0]["same_path"] is True


def test_a_request_that_would_not_have_been_offered_it_hears_nothing(tampered: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLM([text("It is the third of December.")]) as llm:
        scripted(monkeypatch, llm)
        _, out = ask_json(capsys, "what is today's date?")
    assert out["quarantined"] == []
    assert told_in(turn_events(capsys, out["turn_id"])) == []


def test_a_quarantine_by_hand_is_told_too(home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The files still verify: only the lifecycle blocks it, and its loaded manifest is what is ranked.
    assert main(["executors", "quarantine", "get_now", "--reason", "gives the wrong hour"]) == 0
    with ScriptedLLM([text("I cannot tell the time now.")]) as llm:
        scripted(monkeypatch, llm)
        _, out = ask_json(capsys, "what time is it?")
    [told] = out["quarantined"]
    assert (told["name"], told["check"], told["reason"]) == ("get_now", "manual", "gives the wrong hour")
    assert told["notice"] == ("get_now 1.0.0 would have been offered for this request, but it is quarantined: gives the wrong hour. "
                              "`metnos executors show get_now` shows it; once its files verify again, "
                              "`metnos executors rehabilitate get_now` returns it.")


def test_an_action_is_told_only_where_the_autonomy_level_would_have_offered_it(home: Path, capsys: pytest.CaptureFixture[str],
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    tamper("write_files")
    request = "write the word hello to ~/notes/b.txt"
    with ScriptedLLM([text("I could not write it."), text("I can only look in this mode.")]) as llm:
        scripted(monkeypatch, llm)
        _, supervised = ask_json(capsys, request)
        _, read_only = ask_json(capsys, request, "--autonomy", "read_only")
    assert [q["name"] for q in supervised["quarantined"]] == ["write_files"]
    assert supervised["quarantined"][0]["reason"].startswith("main.py: digest failed")
    # read_only offers nothing with side effects: write_files would not have been offered anyway.
    assert read_only["quarantined"] == []
    assert told_in(turn_events(capsys, read_only["turn_id"])) == []


def test_the_daemon_api_and_the_turn_page_say_it(tampered: Path) -> None:
    with ScriptedLLM([text("I could not read that file.")]) as llm:
        daemon = start_daemon(metnos_env(METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted"))
        try:
            with daemon.client() as client:
                reply = client.post("/api/ask", json={"text": REQUEST})
                assert reply.status_code == 200, reply.text
                outcome = reply.json()
                turn = client.get(f"/api/turns/{outcome['turn_id']}").json()
                page = client.get(f"/turns/{outcome['turn_id']}", headers={"Accept": "text/html"})
        finally:
            daemon.stop()
    [told] = outcome["quarantined"]
    assert_names_read_files(told)
    [recorded] = [e["state"]["executors"] for e in turn["events"] if e["type"] == "QuarantinedNotOffered"]
    assert recorded[0]["reason"] == told["reason"]
    assert page.status_code == 200
    html = page.text
    section = html[html.index('id="quarantined"'):]
    section = section[:section.index("</section>")]
    assert '<a href="/executors/read_files"><code>read_files</code></a> 1.0.0 would have been offered' in section
    assert told["reason"] in section and f"<code>{SHOW}</code>" in section


def test_a_telegram_reply_says_it(tampered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token, chat = "123456:TEST-not-a-real-token", 4242
    monkeypatch.setenv("METNOS_TEST_TELEGRAM_TOKEN", token)
    with FakeBotAPI(token) as bot, ScriptedLLM([text("I could not read that file.")]) as llm:
        scripted(monkeypatch, llm)
        workspace = Workspace.from_env()
        workspace.config_file.write_text(f'[telegram]\ntoken_env = "METNOS_TEST_TELEGRAM_TOKEN"\nallowed_chats = [{chat}]\n'
                                         f'base_url = "{bot.url}"\npoll_timeout_s = 1\n')
        runtime = Runtime.boot(workspace)
        channel = TelegramChannel(RuntimeHost(runtime), load_telegram_settings(workspace.config_file))
        channel.start()
        try:
            bot.user_says(chat, REQUEST)
            sent = bot.wait_for("sendMessage", lambda p: p["chat_id"] == chat)
        finally:
            channel.stop()
            runtime.close()
    # What the chat shows: Telegram HTML, the command as code.
    reply = sent.result["text"]
    assert f"<code>{SHOW}</code>" in sent.params["text"]
    # The model said it could not: the turn is not done, in its own words.
    assert reply.startswith("metnos: Not done, as the language model itself said: I could not read that file.")
    told = reply.split("\n\n")[-1]
    assert told.startswith("metnos: read_files 1.0.0 would have been offered for this request, but it is quarantined: main.py: digest failed")
    assert SHOW in told


@pytest.fixture
def mcp_served(tampered: Path) -> Iterator[tuple[str, Runtime]]:
    with mcp_over_http() as served:
        yield served


def test_an_mcp_call_to_it_says_why_not_that_it_does_not_exist(mcp_served: tuple[str, Runtime]) -> None:
    url, runtime = mcp_served

    async def session() -> tuple[Any, Any]:
        async with Client(url) as client:
            return await client.list_tools(), await client.call_tool("read_files", {"paths": ["~/notes/a.md"]})

    tools, result = asyncio.run(session())
    assert "read_files" not in {t.name for t in tools.tools}
    assert result.is_error is True
    body = result.structured_content
    assert body["ok"] is False and body["error_class"] == "Quarantined"
    error = body["error"]
    assert (error["name"], error["version"], error["show"]) == ("read_files", "1.0.0", SHOW)
    assert error["reason"].startswith("main.py: digest failed")
    assert error["message"].startswith("read_files 1.0.0 is quarantined: main.py: digest failed") and f"`{SHOW}`" in error["message"]
    runtime.refresh()
    refused = [e for _, e in runtime.log.domain_events() if type(e).__name__ == "InvocationRefused"]
    assert [e.kind for e in refused] == ["Quarantined"]


def test_the_daemon_api_says_it_in_the_requests_language(tampered: Path) -> None:
    """The notice the API gives is said in the request's language; the event keeps the English every replay reads."""
    with ScriptedLLM([text("Non ho potuto leggere quel file.")]) as llm:
        daemon = start_daemon(metnos_env(METNOS_LLM_URL=llm.url, METNOS_LLM_MODEL="scripted"))
        try:
            with daemon.client() as client:
                outcome = client.post("/api/ask", json={"text": "leggi il file ~/notes/a.md e dimmi cosa c'è scritto"}).json()
                turn = client.get(f"/api/turns/{outcome['turn_id']}").json()
        finally:
            daemon.stop()
    [told] = outcome["quarantined"]
    assert told["name"] == "read_files" and told["notice"].startswith("read_files 1.0.0 sarebbe stato offerto"), told
    # The reason's data (the digests) as recorded, its words said too; the command as it is typed.
    assert told["reason"].split("(", 1)[1] in told["notice"] and f"`{SHOW}`" in told["notice"], told
    [started] = [e["state"] for e in turn["events"] if e["type"] == "TurnStarted"]
    assert started["language"] == "it"
