"""Telegram in and out, against a fake Bot API server on 127.0.0.1 (issue 21 item 3).

python-telegram-bot long-polls the fake server (tests/support/fake_telegram.py),
the model is the scripted LLM server, the executors run in bubblewrap, in both
layouts. A message runs a turn whose action asks for approval in the chat; the
test presses the button and the action runs. Unanswered, the approval times
out and nothing runs. A chat that is not allowed gets nothing, and the log
says it was turned away.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metnos.services.host import RuntimeHost
from metnos.adapters.channels.telegram import TelegramChannel, TelegramChannelError
from metnos.settings.config_file import load_telegram_settings
from metnos.runtime.booted import Runtime
from metnos.settings.workspace import Workspace
from tests.support.fake_telegram import FakeBotAPI
from tests.support.scripted_llm import ScriptedLLM, call, text

pytestmark = pytest.mark.bwrap

TOKEN = "123456:TEST-not-a-real-token"
TOKEN_ENV = "METNOS_TEST_TELEGRAM_TOKEN"
ALLOWED = 4242
STRANGER = 999
MESSAGE = {"messages": [{"to_user": "lucia", "body": "back at seven"}]}


def _events(runtime: Runtime) -> list[tuple[str, Any]]:
    return [(type(e).__name__, e) for _, e in runtime.log.domain_events()]


def _outbox(workspace: Workspace) -> list[Path]:
    return sorted(workspace.outbox_dir.glob("*.json")) if workspace.outbox_dir.exists() else []


@pytest.fixture
def bot(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBotAPI]:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with FakeBotAPI(TOKEN) as api:
        yield api


def _channel(api: FakeBotAPI, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch, *, approval_timeout_s: float,
             allowed: tuple[int, ...] = (ALLOWED,), extra: str = "") -> tuple[Runtime, TelegramChannel]:
    monkeypatch.setenv("METNOS_LLM_URL", llm.url)
    monkeypatch.setenv("METNOS_LLM_MODEL", "scripted")
    workspace = Workspace.from_env()
    workspace.config_file.write_text(
        f'[telegram]\ntoken_env = "{TOKEN_ENV}"\nallowed_chats = [{", ".join(map(str, allowed))}]\nbase_url = "{api.url}"\n'
        f"approval_timeout_s = {approval_timeout_s}\npoll_timeout_s = 1\n\n[telegram.chat_ids]\nlucia = {ALLOWED}\n{extra}")
    runtime = Runtime.boot(workspace)
    channel = TelegramChannel(RuntimeHost(runtime), load_telegram_settings(workspace.config_file))
    channel.start()
    return runtime, channel


def _buttons(params: dict[str, Any]) -> list[dict[str, Any]]:
    return params["reply_markup"]["inline_keyboard"][0]


def test_a_message_runs_a_turn_whose_action_is_approved_in_the_chat(bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLM([call("send_messages", MESSAGE), text("I sent lucia your message: back at seven.")]) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120)
        try:
            bot.user_says(ALLOWED, "tell lucia I am back at seven")
            question = bot.wait_for("sendMessage", lambda p: "reply_markup" in p)
            assert question.params["chat_id"] == ALLOWED and "send_messages" in question.params["text"]
            assert not _outbox(runtime.workspace)  # nothing sent before the press
            approve, deny = _buttons(question.params)
            assert (approve["text"], deny["text"]) == ("Approve", "Deny")
            # Another chat pressing the same button (it saw the data somewhere) answers nothing.
            forged = {**question.result, "chat": {"id": STRANGER, "type": "private"}}
            before = len(bot.calls)
            bot.press(forged, approve["callback_data"], user_id=STRANGER)
            assert bot.wait_for("answerCallbackQuery", after=before).params["text"] == "This approval is no longer open."
            assert not _outbox(runtime.workspace)
            bot.press(question.result, approve["callback_data"])
            answer = bot.wait_for("sendMessage", lambda p: "back at seven" in p["text"] and "reply_markup" not in p)
        finally:
            channel.stop()
    assert answer.params["chat_id"] == ALLOWED
    assert bot.wait_for("answerCallbackQuery", lambda p: p.get("text") == "Approved")
    assert bot.wait_for("editMessageReplyMarkup").params["message_id"] == question.result["message_id"]
    assert len(_outbox(runtime.workspace)) == 1

    runtime.refresh()
    events = _events(runtime)
    [started] = [e for name, e in events if name == "TurnStarted"]
    assert started.channel == "telegram" and started.text == "tell lucia I am back at seven"
    assert started.actor == f"telegram:{ALLOWED}"  # the sender (the fake's user id is the chat's)
    [answered] = [e for name, e in events if name == "ApprovalAnswered"]
    assert (answered.approved, answered.by) == (True, "telegram:button")
    [requested] = [e for name, e in events if name == "InvocationRequested" and e.executor == "send_messages"]
    assert requested.caller["channel"] == "telegram" and requested.caller["actor"] == f"telegram:{ALLOWED}" and requested.turn_id == str(started.originator_id)
    assert [name for name, _ in events if name == "TurnAnswered"]
    runtime.close()
    # The token is in no event.
    assert TOKEN not in repr([e.__dict__ for _, e in events])


GUEST = 5151


def test_the_first_chat_is_the_host_and_the_next_a_guest_who_may_approve_nothing(bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    from domain.household import guest_name

    # The host's turn asks and acts; the guest's same request is refused without a question, in its own chat.
    script = [call("send_messages", MESSAGE), text("Sent."), call("send_messages", MESSAGE), text("Not sent.")]
    with ScriptedLLM(script) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120, allowed=(ALLOWED, GUEST))
        try:
            bot.user_says(ALLOWED, "tell lucia I am back at seven")
            question = bot.wait_for("sendMessage", lambda p: "reply_markup" in p)
            bot.press(question.result, _buttons(question.params)[0]["callback_data"])
            bot.wait_for("sendMessage", lambda p: p["chat_id"] == ALLOWED and p["text"] == "Sent.")
            asked = len(bot.calls)
            bot.user_says(GUEST, "tell lucia I am back at seven")
            reply = bot.wait_for("sendMessage", lambda p: p["chat_id"] == GUEST, after=asked)
            # Nothing was asked of anyone after the guest spoke.
            assert not [c for c in bot.calls[asked:] if c.method == "sendMessage" and "reply_markup" in c.params]
        finally:
            channel.stop()
    assert "reply_markup" not in reply.params
    assert len(_outbox(runtime.workspace)) == 1  # the host's message only
    runtime.refresh()
    events = _events(runtime)
    paired = [(e.address, e.actor) for name, e in events if name == "ActorPaired"]
    assert paired == [(str(ALLOWED), "host"), (str(GUEST), guest_name("telegram", str(GUEST)))]
    started = [e for name, e in events if name == "TurnStarted"]
    assert [(s.principal, s.autonomy) for s in started] == [("host", "supervised"), (guest_name("telegram", str(GUEST)), "read_only")]
    guest_turn = started[1].originator_id
    assert not [e for name, e in events if name == "InvocationRequested" and e.executor == "send_messages" and e.turn_id == str(guest_turn)]
    runtime.close()


def test_a_schedule_said_in_a_chat_is_shown_with_its_next_firings_and_saved_on_a_yes_as_the_chat_actor(
        bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    from domain.household import guest_name

    timed = {"executor": "get_now", "cron": "every morning at 8", "channel": "none"}
    # A turn whose call was refused is told the action was not taken and may try again: spare rounds keep the script ahead.
    refused = [call("schedule_recurring", timed), text("Not scheduled.")] * 2
    script = [call("schedule_recurring", timed), text("Scheduled."), call("schedule_recurring", timed), text("Scheduled."),
              *refused, *refused]
    # A guest may act here (supervised) and keep one schedule.
    policy = '\n[actors.guest]\nautonomy = "supervised"\nmax_schedules = 1\n'
    guest = guest_name("telegram", str(GUEST))
    with ScriptedLLM(script) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120, allowed=(ALLOWED, GUEST), extra=policy)
        try:
            shown = []
            for chat in (ALLOWED, GUEST):
                asked = len(bot.calls)
                bot.user_says(chat, "tell me the time every morning at 8")
                question = bot.wait_for("sendMessage", lambda p, chat=chat: p["chat_id"] == chat and "reply_markup" in p, after=asked)
                shown.append(question.params["text"])
                bot.press(question.result, _buttons(question.params)[0]["callback_data"])
                bot.wait_for("sendMessage", lambda p, chat=chat: p["chat_id"] == chat and p["text"] == "Scheduled.", after=asked)
            # The guest's second one is over its quota: refused before any question.
            asked = len(bot.calls)
            bot.user_says(GUEST, "tell me the time every morning at 8")
            bot.wait_for("sendMessage", lambda p: p["chat_id"] == GUEST and "reply_markup" not in p, after=asked)
            assert not [c for c in bot.calls[asked:] if c.method == "sendMessage" and "reply_markup" in c.params]
            # The host says no: nothing is saved.
            asked = len(bot.calls)
            bot.user_says(ALLOWED, "tell me the time every morning at 8")
            question = bot.wait_for("sendMessage", lambda p: p["chat_id"] == ALLOWED and "reply_markup" in p, after=asked)
            bot.press(question.result, _buttons(question.params)[1]["callback_data"])
            bot.wait_for("sendMessage", lambda p: p["chat_id"] == ALLOWED and p["text"].startswith("metnos:"), after=asked)
        finally:
            channel.stop()
    runtime.refresh()
    events = _events(runtime)
    created = [e for name, e in events if name == "ScheduleCreated"]
    confirmed = [e for name, e in events if name == "ScheduleConfirmed"]
    assert [(c.actor, c.cron) for c in created if c.owner == "user"] == [("host", "0 8 * * *"), (guest, "0 8 * * *")]
    assert [(c.by, len(c.next_fires)) for c in confirmed] == [("telegram:button", 3), ("telegram:button", 3)]
    # What the chat was shown is what the log says it confirmed: the cron and its next three firings.
    for text_shown, yes in zip(shown, confirmed):
        assert "0 8 * * *" in text_shown and all(fire in text_shown for fire in yes.next_fires)
    refusals = [e.observation["error"] for name, e in events if name == "BuiltinCalled" and not e.observation.get("ok")]
    assert [r["kind"] for r in refusals] == ["SchedulerError", "NotConfirmed"]
    assert "the most [actors.guest] max_schedules allows (1)" in refusals[0]["message"]
    assert refusals[1]["message"].startswith("the user did not confirm the schedule (0 8 * * *")
    runtime.close()


def test_an_unanswered_approval_times_out_and_nothing_runs(bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLM([call("send_messages", MESSAGE), text("I did not send it.")]) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=1.5)
        try:
            bot.user_says(ALLOWED, "tell lucia I am back at seven")
            question = bot.wait_for("sendMessage", lambda p: "reply_markup" in p)
            bot.wait_for("sendMessage", lambda p: p["text"].startswith("No answer in"))
            # The turn is told no and ends; its outcome goes back to the chat.
            asked = len(bot.calls)
            bot.wait_for("sendMessage", lambda p: p["text"].startswith("metnos:") or "did not send" in p["text"], after=asked - 1)
            # A press after the timeout changes nothing.
            late = len(bot.calls)
            bot.press(question.result, _buttons(question.params)[0]["callback_data"])
            assert bot.wait_for("answerCallbackQuery", after=late).params["text"] == "This approval is no longer open."
        finally:
            channel.stop()
    assert not _outbox(runtime.workspace)
    runtime.refresh()
    events = _events(runtime)
    [answered] = [e for name, e in events if name == "ApprovalAnswered"]
    assert (answered.approved, answered.by) == (False, "telegram:timeout")
    assert not [e for name, e in events if name == "InvocationRequested" and e.executor == "send_messages"]
    assert bot.wait_for("editMessageReplyMarkup").params["message_id"] == question.result["message_id"]
    runtime.close()


def test_a_chat_that_is_not_allowed_is_ignored_and_audited(bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLM([text("nobody should ask me")]) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120)
        try:
            bot.user_says(STRANGER, "delete everything", user_id=777)
            deadline = time.monotonic() + 60
            ignored: list[Any] = []
            while not ignored and time.monotonic() < deadline:
                ignored = [e for name, e in _events(runtime) if name == "MessageIgnored"]
                time.sleep(0.1)
            # An allowed chat is still served after it.
            bot.user_says(ALLOWED, "hello")
            bot.wait_for("sendMessage", lambda p: p["chat_id"] == ALLOWED)
        finally:
            channel.stop()
        assert len(llm.requests) == 1  # the allowed chat's turn only
    [event] = ignored
    assert (event.channel, event.chat_id, event.sender) == ("telegram", str(STRANGER), "777")
    assert event.text_size == len("delete everything") and "delete" not in repr(event.__dict__)
    assert not [p for p in bot.sent() if p["chat_id"] == STRANGER]
    assert not [name for name, e in _events(runtime) if name == "TurnStarted" and e.text == "delete everything"]
    runtime.close()


def test_the_token_is_never_in_config(tmp_path: Path) -> None:
    from metnos.settings.telegram import TelegramConfigError

    config = tmp_path / "config.toml"
    config.write_text('[telegram]\ntoken = "123:abc"\n')
    with pytest.raises(TelegramConfigError, match=r"\[telegram\] token: the bot token never goes in config.toml"):
        load_telegram_settings(config)
    config.write_text('[telegram]\nallowed_chats = ["me"]\n')
    with pytest.raises(TelegramConfigError, match=r"\[telegram\] allowed_chats"):
        load_telegram_settings(config)
    config.write_text('[telegram]\ntoken_env = "MY_BOT"\n')
    with pytest.raises(TelegramConfigError, match="set the environment variable MY_BOT") as raised:
        load_telegram_settings(config).token({})
    assert "123" not in str(raised.value)


def test_a_token_the_bot_api_rejects_stops_the_start_and_is_not_shown(bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = "654321:WRONG-token-never-shown"
    monkeypatch.setenv(TOKEN_ENV, wrong)
    workspace = Workspace.from_env()
    workspace.config_file.write_text(f'[telegram]\ntoken_env = "{TOKEN_ENV}"\nallowed_chats = [{ALLOWED}]\nbase_url = "{bot.url}"\n')
    lines: list[str] = []
    with Runtime.boot(workspace) as runtime:
        channel = TelegramChannel(RuntimeHost(runtime), load_telegram_settings(workspace.config_file), log=lines.append)
        with pytest.raises(TelegramChannelError) as raised:
            channel.start()
    message = str(raised.value)
    assert "could not start" in message and "<token>" in message  # the library named the token: redacted
    assert wrong not in message and wrong not in " ".join(lines)


MARKDOWN_ANSWER = "**Done**: 3 < 5 & `a<b>` stays <i>as written</i>"


def test_an_answer_is_formatted_threaded_to_the_request_and_typed_before(bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLM([text(MARKDOWN_ANSWER)] * 3) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120)
        try:
            request = bot.user_says(ALLOWED, "how is it going?")
            answer = bot.wait_for("sendMessage", lambda p: p["chat_id"] == ALLOWED)
        finally:
            channel.stop()
    typing = bot.wait_for("sendChatAction")
    assert (typing.params["chat_id"], typing.params["action"]) == (ALLOWED, "typing")
    assert bot.calls.index(typing) < bot.calls.index(answer)  # the chat saw "typing" while the turn ran
    assert answer.params["parse_mode"] == "HTML"
    assert answer.params["reply_parameters"]["message_id"] == request["message_id"]
    # The markdown became markup; the answer's own angle brackets and ampersand reached the chat as text.
    assert "<b>Done</b>" in answer.params["text"] and "<code>a&lt;b&gt;</code>" in answer.params["text"]
    assert "Done: 3 < 5 & a<b> stays <i>as written</i>" in answer.result["text"]
    runtime.close()


def test_an_answer_whose_markup_is_refused_goes_as_plain_text(bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    bot.refuse_markup = True
    with ScriptedLLM([text(MARKDOWN_ANSWER)] * 3) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120)
        try:
            request = bot.user_says(ALLOWED, "how is it going?")
            answer = bot.wait_for("sendMessage", lambda p: p["chat_id"] == ALLOWED and "parse_mode" not in p)
        finally:
            channel.stop()
    assert MARKDOWN_ANSWER in answer.params["text"]
    assert answer.params["reply_parameters"]["message_id"] == request["message_id"]
    [refused] = [c for c in bot.calls if c.method == "sendMessage" and "parse_mode" in c.params]
    assert bot.calls.index(refused) < bot.calls.index(answer)
    runtime.close()


PAIRED = 5151


def test_a_chat_that_sends_a_pairing_code_is_let_in_once_and_by_an_event(bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import orjson

    from metnos.adapters.cli import main
    from metnos.services import pairing

    assert main(["telegram", "pair", "--json"]) == 0
    code = orjson.loads(capsys.readouterr().out)["code"]
    with ScriptedLLM([text("Hello from Metnos.")] * 3) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120)
        try:
            with channel.host.writing() as rt:
                expired, _ = pairing.issue_code(rt, channel="telegram", ttl_s=0.001)
            bot.user_says(PAIRED, "hello")  # not yet paired: ignored
            bot.user_says(PAIRED, code)
            bot.wait_for("sendMessage", lambda p: p["chat_id"] == PAIRED and p["text"].startswith("Paired"))
            bot.user_says(PAIRED, "hello again")
            answer = bot.wait_for("sendMessage", lambda p: p["chat_id"] == PAIRED and "Hello from Metnos" in p["text"])
            # The same code from another chat, and an expired code, let nobody in.
            bot.user_says(STRANGER, code)
            bot.user_says(STRANGER + 1, expired)
            deadline = time.monotonic() + 60
            while len([e for name, e in _events(runtime) if name == "MessageIgnored"]) < 3 and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            channel.stop()
    assert answer.params["reply_parameters"]["message_id"]
    events = _events(runtime)
    [issued, _] = [e for name, e in events if name == "CodeIssued"]
    [paired] = [e for name, e in events if name == "ChatPaired"]
    assert (paired.channel, paired.chat_id, paired.code_digest) == ("telegram", str(PAIRED), issued.code_digest)
    assert sorted(e.chat_id for name, e in events if name == "MessageIgnored") == sorted(map(str, [PAIRED, STRANGER, STRANGER + 1]))
    assert not [p for p in bot.sent() if p["chat_id"] in (STRANGER, STRANGER + 1)]
    assert code not in repr([e.__dict__ for _, e in events])  # the log keeps the code's digest only
    # Started again, the channel serves the paired chat from the log.
    runtime.close()
    runtime = Runtime.boot(runtime.workspace)
    lines: list[str] = []
    again = TelegramChannel(RuntimeHost(runtime), load_telegram_settings(runtime.workspace.config_file), log=lines.append)
    again.start()
    again.stop()
    assert "2 allowed chat(s)" in lines[0]  # allowed_chats' one, and the paired one
    runtime.close()


WATCHDOG_SAYS = "A sandbox per skill is now advised"


def _fire_the_watchdog(runtime: Runtime, channel: TelegramChannel) -> None:
    """The sandbox watchdog fired as the daemon's scheduler fires it, through the daemon's delivery port."""
    from domain.schedule import builtin_schedule_id
    from metnos.runtime.scheduler.service import ScheduleService
    from metnos.runtime.scheduler.tick import Scheduler
    from metnos.services import daemon, delivery

    ScheduleService(runtime).install_builtin_jobs()
    deadline = time.monotonic() + 30
    while not channel.host.outbox.serves_itself("telegram"):
        assert time.monotonic() < deadline, "the channel never served its outbox"
        time.sleep(0.05)
    deliver = delivery.scheduled_delivery(channel.host, daemon.scheduled_address(runtime), told=daemon.told_chat(runtime))
    Scheduler(runtime, deliver=deliver).run_now(str(builtin_schedule_id("skill_sandbox_watchdog")))


def _told_in_the_outbox(workspace: Workspace) -> list[str]:
    import json

    return [json.loads(p.read_text())["body"] for p in _outbox(workspace)]


def test_a_nightly_job_that_tells_the_user_reaches_the_hosts_paired_chat_and_stays_in_the_outbox(
        bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    from metnos.runtime.actors import pair

    with ScriptedLLM([]) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120, allowed=(ALLOWED, GUEST))
        try:
            # The host's chat, then a guest's: the watchdog has something to tell.
            assert pair(runtime, "telegram", str(ALLOWED)) == "host"
            pair(runtime, "telegram", str(GUEST))
            asked = len(bot.calls)
            _fire_the_watchdog(runtime, channel)
            told = bot.wait_for("sendMessage", lambda p: p["chat_id"] == ALLOWED and WATCHDOG_SAYS in p["text"], after=asked)
            # Only the host's chat: a guest is not told the host's maintenance.
            assert [c.params["chat_id"] for c in bot.calls[asked:] if c.method == "sendMessage"] == [ALLOWED]
        finally:
            channel.stop()
    # The outbox folder keeps it as the record; the log says it was queued for the chat and sent.
    [kept] = _told_in_the_outbox(runtime.workspace)
    assert WATCHDOG_SAYS in kept and WATCHDOG_SAYS in told.params["text"]
    runtime.refresh()
    queued = [e for name, e in _events(runtime) if name == "MessageQueued" and e.kind == "scheduled"]
    assert [(e.channel, e.address) for e in queued] == [("telegram", str(ALLOWED))]
    assert any(name == "MessageSent" for name, _ in _events(runtime))
    runtime.close()


def test_a_nightly_job_stays_in_the_outbox_when_no_telegram_chat_is_the_hosts(bot: FakeBotAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    from metnos.runtime.actors import pair

    with ScriptedLLM([]) as llm:
        runtime, channel = _channel(bot, llm, monkeypatch, approval_timeout_s=120, allowed=(ALLOWED, GUEST))
        try:
            # The dashboard was paired first: the host is that device, both chats are guests.
            assert pair(runtime, "http", "dashboard-device") == "host"
            pair(runtime, "telegram", str(ALLOWED))
            asked = len(bot.calls)
            _fire_the_watchdog(runtime, channel)
            time.sleep(1.0)  # time enough for a queued message to be sent, were there one
            assert not [c for c in bot.calls[asked:] if c.method == "sendMessage"]
        finally:
            channel.stop()
    [kept] = _told_in_the_outbox(runtime.workspace)
    assert WATCHDOG_SAYS in kept
    runtime.close()
