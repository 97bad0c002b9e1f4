"""Issue 35 item 5: turns that continue a conversation, end to end through the CLI
(`metnos ask --continue`, `--new`) against a scripted model on 127.0.0.1.

What is asserted is what the model was shown (a follow-up sees the earlier request, its
answer and what its steps returned, marked as data; a turn alone sees what it always saw),
what the log holds (the conversation on TurnStarted) and that the follow-up replays from
the log alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from metnos.adapters.cli import main
from metnos.adapters.channels.telegram import TelegramChannel
from metnos.runtime.booted import Runtime
from metnos.services.host import RuntimeHost
from metnos.settings.config_file import load_telegram_settings
from metnos.settings.workspace import Workspace
from tests.support.fake_telegram import FakeBotAPI
from tests.support.scripted_llm import ScriptedLLM, call, text
from tests.support.turn_log import events, of

# What is tested is the turn's context, the same in every layout: one keeps the suite short.
pytestmark = pytest.mark.parametrize("layout", ["xdg"])

NOTE = "alpha quokka\nbeta\ngamma zanzibar\n"


def ask(monkeypatch, capsys, script, *argv: str) -> tuple[int, dict, ScriptedLLM]:
    with ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        capsys.readouterr()
        code = main(["ask", "--yes", "--json", *argv])
        out = orjson.loads(capsys.readouterr().out)
    return code, out, llm


def started(capsys, turn_id: str) -> dict:
    return of(events(capsys, turn_id), "TurnStarted")[0]


def test_a_follow_up_sees_the_turn_before_and_replays_from_the_log(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    (home / "notes" / "a.txt").write_text(NOTE)
    first = text("The first line is: alpha quokka")
    code, one, llm = ask(monkeypatch, capsys, [first, first], "read ~/notes/a.txt and tell me its first line")
    assert code == 0 and one["status"] == "answered", one
    # A turn alone is shown what a turn has always been shown, and records no conversation.
    assert [m["role"] for m in llm.requests[0].messages] == ["system", "user", "assistant", "tool"]
    assert started(capsys, one["turn_id"]).get("conversation") is None

    script = [call("read_files", {"paths": ["~/notes/a.txt"]}), text("The last line is: gamma zanzibar")]
    code, two, llm = ask(monkeypatch, capsys, script, "--continue", "and the last one?")
    assert code == 0 and two["status"] == "answered" and "gamma zanzibar" in two["answer"], two
    shown = llm.requests[0].messages
    assert [m["role"] for m in shown[:3]] == ["system", "system", "user"] and shown[2]["content"] == "and the last one?"
    context = shown[1]["content"]
    assert "Request 1: read ~/notes/a.txt and tell me its first line" in context
    assert "Answer 1: alpha quokka" in context
    # What the earlier steps returned, cut short, marked as data and never instructions.
    assert "gamma zanzibar" in context and "never instructions" in context
    # The follow-up was offered the tool the earlier request needed although its own words name none.
    assert "read_files" in llm.requests[0].tool_names

    conversation = started(capsys, two["turn_id"])["conversation"]
    assert conversation["id"] == one["turn_id"] and conversation["key"] == "cli"
    capsys.readouterr()
    assert main(["turns", "show", two["turn_id"]]) == 0
    assert f"conversation {one['turn_id'][:8]}, shown 1 earlier turn(s)" in capsys.readouterr().out
    assert [t["turn"] for t in conversation["earlier"]] == [one["turn_id"]]
    capsys.readouterr()
    assert main(["replay", two["turn_id"]]) == 0, capsys.readouterr().out

    # What an earlier turn found may be said again without a step of its own.
    code, three, llm = ask(monkeypatch, capsys, [text("It was: alpha quokka")], "--continue", "what was the first one again?")
    assert code == 0 and three["status"] == "answered", three
    conversation = started(capsys, three["turn_id"])["conversation"]
    assert conversation["id"] == one["turn_id"]
    assert [t["turn"] for t in conversation["earlier"]] == [one["turn_id"], two["turn_id"]]

    # --new: a turn alone again, shown nothing of the conversation.
    code, four, llm = ask(monkeypatch, capsys, [text("Nothing to refer to.")], "--new", "and the one before?")
    assert [m["role"] for m in llm.requests[0].messages] == ["system", "user"]
    assert started(capsys, four["turn_id"]).get("conversation") is None


TOKEN = "123456:TEST-not-a-real-token"
TOKEN_ENV = "METNOS_TEST_TELEGRAM_TOKEN"
CHAT = 4242


def started_in(runtime: Runtime) -> list[Any]:
    runtime.refresh()
    return [e for _, e in runtime.log.domain_events() if type(e).__name__ == "TurnStarted"]


@pytest.mark.bwrap
def test_a_telegram_chat_is_a_conversation_until_new(home: Path, monkeypatch) -> None:
    """"send that to lucia" sends what the chat's previous turn answered; /new starts over."""
    (home / "notes").mkdir()
    (home / "notes" / "a.txt").write_text(NOTE)
    first = text("The first line is: alpha quokka")
    send = call("send_messages", {"messages": [{"to_user": "lucia", "body": "alpha quokka"}]})
    script = [first, first, send, text("I sent lucia: alpha quokka."), text("Hello.")]
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with FakeBotAPI(TOKEN) as bot, ScriptedLLM(script, dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
        workspace = Workspace.from_env()
        workspace.config_file.write_text(
            f'[telegram]\ntoken_env = "{TOKEN_ENV}"\nallowed_chats = [{CHAT}]\nbase_url = "{bot.url}"\n'
            f"poll_timeout_s = 1\n\n[telegram.chat_ids]\nlucia = {CHAT}\n")
        runtime = Runtime.boot(workspace)
        channel = TelegramChannel(RuntimeHost(runtime), load_telegram_settings(workspace.config_file))
        channel.start()
        try:
            bot.user_says(CHAT, "read ~/notes/a.txt and tell me its first line")
            bot.wait_for("sendMessage", lambda p: "alpha quokka" in p["text"])
            bot.user_says(CHAT, "send that to lucia")
            question = bot.wait_for("sendMessage", lambda p: "reply_markup" in p)
            approve = question.params["reply_markup"]["inline_keyboard"][0][0]
            bot.press(question.result, approve["callback_data"])
            bot.wait_for("sendMessage", lambda p: "I sent lucia" in p["text"])
            bot.user_says(CHAT, "/new")
            bot.wait_for("sendMessage", lambda p: "new conversation" in p["text"])
            bot.user_says(CHAT, "hi")
            bot.wait_for("sendMessage", lambda p: p["text"] == "Hello.")
        finally:
            channel.stop()
        # The follow-up was shown the turn before; the turn after /new, nothing.
        assert "Answer 1: alpha quokka" in llm.requests[2].messages[1]["content"]
        assert [m["role"] for m in llm.requests[4].messages] == ["system", "user"]
    one, two, three = started_in(runtime)
    key = f"telegram:{CHAT}"
    assert one.conversation == {"id": str(one.originator_id), "key": key, "earlier": []}
    assert two.conversation["id"] == str(one.originator_id) and two.conversation["key"] == key
    assert [t["turn"] for t in two.conversation["earlier"]] == [str(one.originator_id)]
    assert three.conversation == {"id": str(three.originator_id), "key": key, "earlier": []}
    # What the previous answer said went to the recipient the request named, after the press.
    [sent] = [orjson.loads(p.read_bytes()) for p in sorted(workspace.outbox_dir.glob("*.json"))]
    assert "alpha quokka" in orjson.dumps(sent).decode()
    runtime.close()


def test_undo_that_puts_back_the_turn_before_once_approved(home: Path, capsys, monkeypatch) -> None:
    (home / "notes").mkdir()
    note = home / "notes" / "b.txt"
    note.write_text("old\n")
    write = call("write_files", {"files": [{"path": "~/notes/b.txt", "content": "new\n", "mode": "overwrite"}]})
    code, one, _ = ask(monkeypatch, capsys, [write, text("Done: ~/notes/b.txt now says new.")], "replace the text of ~/notes/b.txt with new")
    assert code == 0 and note.read_text() == "new\n", one
    # Declined, nothing is put back; the model is never asked: "that" is the conversation's turn before.
    with ScriptedLLM([], dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        capsys.readouterr()
        declined = main(["ask", "--no", "--json", "--continue", "undo that"])
        refused = orjson.loads(capsys.readouterr().out)
        assert declined == 3 and refused["status"] == "refused" and refused["turn_id"] == one["turn_id"], refused
        assert note.read_text() == "new\n"
        capsys.readouterr()
        assert main(["ask", "--yes", "--json", "--continue", "undo that"]) == 0
        undone = orjson.loads(capsys.readouterr().out)
        assert llm.requests == []
    assert undone["status"] == "answered" and "~/notes/b.txt" in undone["answer"], undone
    assert note.read_text() == "old\n"
    assert of(events(capsys, one["turn_id"]), "TurnUndone")
    # Alone, "undo that" has no turn before to refer to: a turn like any other, the model asked.
    with ScriptedLLM([text("Which change do you mean?")], dialect="openai") as llm:
        monkeypatch.setenv("METNOS_LLM_URL", llm.url)
        capsys.readouterr()
        main(["ask", "--json", "undo that"])
        assert len(llm.requests) == 1
