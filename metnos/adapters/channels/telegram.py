"""Telegram, in and out: a chat message is a turn; approvals are buttons in the chat.

Long polling with python-telegram-bot (pinned ``>=22.5,<23``; its HTTP client
is httpx, already Metnos's, and its base URL points anywhere, which is how the
tests put a fake Bot API server on 127.0.0.1 in front of it).

* A text message from a chat in ``[telegram] allowed_chats`` runs a turn
  with ``channel="telegram"`` and ``actor="telegram:<sender's user id>"``
  (the same ``run_turn`` as ``metnos ask``; its invocations carry both in
  their ``caller``); the answer, or why there is none, goes back to the chat.
* A chat paired with a one-time code (``metnos telegram pair``; the code sent
  from the chat, metnos/services/pairing.py) is served as an allowed chat.
* A message from any other chat gets no turn and no reply; it is audited as
  a ``ChannelMessage.MessageIgnored`` event (chat, sender, the text's size
  and digest, never the text).
* Where the vaglio asks, the approval is a message in the chat with two
  inline buttons; a press (a callback query from the same chat) answers it,
  and no press within ``approval_timeout_s`` is a no. Either way the buttons
  are removed and the answer is said.
* Where the turn asks the user a question (the atomic dialog: a missing
  target, where the user is), the question is a message in the chat and the
  chat's next message is the answer, not a new turn; no message within
  ``approval_timeout_s`` leaves it unanswered and the turn ends needs_input.
* While a turn runs the chat shows "typing" (``sendChatAction``, renewed
  every few seconds); the answer is a reply to the request's message
  (``reply_to_message_id``), in Telegram HTML with the answer's own text
  escaped (metnos/adapters/channels/telegram_format.py); should the Bot API
  refuse the markup, the same answer goes again as plain text.
* A chat is a conversation: each turn sees the chat's earlier turns (docs/turns.md,
  "Conversations"); ``/new`` starts a new one with the chat's next message.

Turns run one at a time on a worker thread; the bot's event loop runs on a
thread of its own, so a turn waiting for an approval never stops the bot from
hearing the button. The channel runs on a host (the daemon's, or
metnos.services.host.RuntimeHost): turns through ``host.ask``, its own events
through metnos.services.channels under ``host.writing()``; whoever holds it
calls ``start()`` and ``stop()``.

The token is read from the variable ``[telegram] token_env`` names, at
start, and kept in memory only: every error text that leaves this module
goes through :func:`redact`, and httpx's request log (which would print the
URL, token included) is kept below INFO.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sys
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
from eventsourcing.utils import get_topic

from domain.delivery import OutgoingMessage
from domain.errors import MetnosError
from metnos.adapters.channels.telegram_format import PARSE_MODE, fitted_html
from metnos.services import inbox, outgoing, pairing
from metnos.services.approvals import ApprovalBroker, ApprovalUnknown
from metnos.services.pending import AlreadyAnswered, PendingUnknown
from metnos.services.channels import record_ignored
from metnos.services.delivery import PROMPTS, DeliveryFailed
from metnos.services.telling import reply_text
from metnos.settings import i18n
from metnos.settings.i18n.detect import language_of
from metnos.settings.loader import for_workspace
from metnos.settings.telegram import TelegramSettings

CHANNEL = "telegram"
MAX_TEXT = 4096  # Telegram's limit for one message
APPROVE, DENY = "ok", "no"
# The buttons of a message given up, shown by /inbox: send it again, or let it go.
RETRY, DISMISS = "rt", "dm"
# Telegram shows a chat action for about 5 s: renewed a little sooner, the indicator never blinks off.
TYPING_EVERY_S = 4.0
# At stop, how long the answers just queued get to go out before they are left queued for the next start.
FLUSH_AT_STOP_S = 3.0
# How often the host's chats are told of what newly waits in the inbox (an approval asked on the dashboard, ...).
PUSH_EVERY_S = 1.0
# The heading of a push: the item follows, with what answers it.
PUSHED = "New in your inbox: "


class TelegramChannelError(MetnosError):
    """The Telegram channel could not start or talk to the Bot API."""


def redact(text: str, secret: str) -> str:
    return text.replace(secret, "<token>") if secret else text


def clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


@dataclass
class _Pending:
    """An approval shown in a chat: where its buttons are (the question itself waits in the broker)."""
    chat_id: int
    key: str = ""
    message_id: int | None = None
    # The prompt's message in the outbox ("" when it went straight out): let go if the approval closes first.
    queued: str = ""
    # Set once the approval is answered: a prompt that lands after has its buttons taken off at once.
    closed: bool = False


@dataclass
class _Question:
    """A turn's question open in a chat: the chat's next message answers it. ``key``: its id in the host's
    one inbox (metnos/services/dialogs.py), where the other ways in can answer it too; "" without one."""
    answered: threading.Event = field(default_factory=threading.Event)
    answer: str | None = None
    stopped: bool = False
    key: str = ""


class TelegramChannel:
    """The channel on a host: the daemon's, or a :class:`~metnos.services.host.RuntimeHost`."""

    name = CHANNEL

    def __init__(self, host: Any, settings: TelegramSettings, *, env: Mapping[str, str] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.host = host
        self.settings = settings
        self.env = dict(os.environ if env is None else env)
        self._token = settings.token(self.env)
        self._log = log or (lambda line: print(f"metnos: telegram: {line}", file=sys.stderr, flush=True))
        self._pending: dict[str, _Pending] = {}
        # The daemon's broker when the host has one (one inbox with the dashboard and the API), else the channel's own.
        self.approvals: ApprovalBroker = getattr(host, "approvals", None) or ApprovalBroker(timeout_s=settings.approval_timeout_s)
        # chat id -> the question a turn asked there and waits on.
        self._questions: dict[int, _Question] = {}
        # (chat id, message id) -> the question of the inbox that message showed (/inbox): a reply to it answers it.
        self._listed_questions: dict[tuple[int, int], str] = {}
        self._pending_lock = threading.Lock()
        # allowed_chats and the chats the log paired; a pairing while the bot runs adds to it.
        self._allowed: set[int] = set(settings.allowed_chats)
        # Chats that asked for a new conversation (/new) and have not asked anything since.
        self._fresh: set[int] = set()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metnos-telegram-turn")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._app: Any = None
        self.bot_username = ""
        # Set at stop: messages taken but not started get a notice instead of a turn.
        self._stopping = False
        # Answers, notices and prompts go through the host's outbox (a host with a log); otherwise straight out.
        self._delivering = False
        # A prompt's outbox id -> what to do with its Telegram message id once sent (remove the buttons later).
        self._on_sent: dict[str, Callable[[int], None]] = {}
        # The outbox's worker may send a prompt before _prompt has noted what to do once it is sent: this lock makes
        # the noting and the sender's look-up one after the other, never crossed.
        self._on_sent_lock = threading.Lock()
        # Messages the Bot API is being sent now: a reply to one of them can reach us before its send returns, so the
        # reply waits for the sends to be noted before it is read as an answer or a new request.
        self._in_flight = 0
        self._sends_noted = threading.Condition(self._on_sent_lock)
        # The items of the inbox the host's chats were told of (once each), and the thread that tells them.
        self._pushed: set[str] = set()
        self._pusher: threading.Thread | None = None
        self._push_stop = threading.Event()

    # Start and stop ----------------------------------------------------------
    def start(self, timeout_s: float = 60.0) -> None:
        """Connect (getMe), start long polling; raises with the reason if the bot cannot start."""
        logging.getLogger("httpx").setLevel(logging.WARNING)
        with self.host.writing() as rt:
            # A host with no runtime (one that only answers, as in the rendering tests) has no log to pair from.
            if rt is not None:
                self._allowed |= {int(chat) for chat in pairing.paired_chats(rt, channel=CHANNEL)}
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._startup())
            except BaseException as e:  # noqa: BLE001 - reported to start()'s caller
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=serve, name="metnos-telegram", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s):
            msg = f"the Telegram Bot API at {self.settings.base_url} did not answer within {timeout_s:.0f} s"
            raise TelegramChannelError(msg)
        if failure:
            self._thread.join(5)
            error = failure[0]
            msg = f"the Telegram bot could not start ({self.settings.base_url}): {redact(f'{type(error).__name__}: {error}', self._token)}"
            raise TelegramChannelError(msg) from None
        if getattr(self.host, "runtime", None) is not None:
            self.host.outbox.serve(CHANNEL, self._deliver)
            self._delivering = True
            if getattr(self.host, "dialogs", None) is not None:
                # The one inbox is pushed, not only pulled with /inbox: a new item is told to the host's chats, once.
                self._pushed = pushed_before(self.host.runtime)
                self._pusher = threading.Thread(target=self._push_loop, name="metnos-telegram-push", daemon=True)
                self._pusher.start()
        self._log(f"polling as @{self.bot_username}; {len(self._allowed)} allowed chat(s)")

    def stop(self) -> None:
        """Stop polling, let a running turn finish (a pending approval is a no), tell the chats whose messages
        were not started yet, send what is due for a moment, close; what is left stays queued in the log."""
        self._stopping = True
        self._push_stop.set()
        if self._pusher is not None:
            self._pusher.join(5)
        with self._pending_lock:
            waiting = [p.key for p in self._pending.values()]
            asked = [q.key for q in self._questions.values() if q.key]
            for question in self._questions.values():
                question.stopped = True
                question.answered.set()
        for key in asked:
            self.host.dialogs.leave(key, by=f"{CHANNEL}:stopped")
        for key in waiting:
            try:
                self.approvals.answer(key, approved=False, by="stopped", channel=CHANNEL)
            except ApprovalUnknown:
                pass  # answered on another way in meanwhile
        self._worker.shutdown(wait=True)
        if self._delivering:
            self.host.outbox.withdraw(CHANNEL, flush_s=FLUSH_AT_STOP_S)
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)

    async def _startup(self) -> None:
        # Deferred: python-telegram-bot takes about 0.3 s to import; a daemon without [telegram] never pays it.
        from telegram import Update
        from telegram.ext import ApplicationBuilder, CallbackQueryHandler, MessageHandler, filters  # the same

        poll = self.settings.poll_timeout_s
        app = (ApplicationBuilder().token(self._token)
               .base_url(f"{self.settings.base_url}/bot").base_file_url(f"{self.settings.base_url}/file/bot")
               .get_updates_read_timeout(poll + 10).read_timeout(max(self.settings.timeout_s, 10))
               .build())
        app.add_handler(MessageHandler(filters.TEXT, self._on_message))
        app.add_handler(CallbackQueryHandler(self._on_button))
        app.add_error_handler(self._on_error)
        await app.initialize()
        self.bot_username = app.bot.username or ""
        await app.start()
        await app.updater.start_polling(timeout=int(poll), allowed_updates=[Update.MESSAGE, Update.CALLBACK_QUERY],
                                        error_callback=lambda e: self._log(f"polling: {redact(str(e), self._token)}"))
        self._app = app

    async def _shutdown(self) -> None:
        app = self._app
        if app is None:
            return
        if app.updater.running:
            await app.updater.stop()
        if app.running:
            await app.stop()
        await app.shutdown()

    async def _on_error(self, update: object, context: Any) -> None:
        error = context.error
        self._log(f"error: {redact(f'{type(error).__name__}: {error}', self._token)}")

    # Messages ----------------------------------------------------------------
    async def _on_message(self, update: Any, context: Any) -> None:
        message = update.effective_message
        chat = update.effective_chat
        if message is None or chat is None or not message.text:
            return
        sender = str(update.effective_user.id) if update.effective_user else ""
        if chat.id not in self._allowed:
            self._worker.submit(self._pair_or_ignore, chat.id, sender, message.text)
            return
        if message.text.strip() == "/new":
            # The chat's next message starts a conversation of its own (docs/turns.md, "Conversations").
            self._fresh.add(chat.id)
            await message.reply_text("A new conversation starts with your next message.")
            return
        if message.text.strip() == "/inbox":
            # What waits for the user on every way in: approvals, questions, messages given up.
            code = (getattr(update.effective_user, "language_code", None) or "").split("-")[0]
            await asyncio.to_thread(self._show_inbox, chat.id, code or i18n.SOURCE)
            return
        replied = getattr(message, "reply_to_message", None)
        listed = self._listed_questions.get((chat.id, replied.message_id)) if replied is not None else None
        if replied is not None and listed is None:
            # A reply to a message whose send has not returned yet: what that message was is known once it has.
            await asyncio.to_thread(self._sends_settled)
            listed = self._listed_questions.get((chat.id, replied.message_id))
        if listed is not None:
            # A reply to a question /inbox showed: its answer, whichever way in asked it.
            await asyncio.to_thread(self._answer_listed, chat.id, listed, message.text)
            return
        if message.text.strip() == "/start":
            # No request to read a language from yet: the one the user's Telegram is set to, if the catalogue has it.
            code = (getattr(update.effective_user, "language_code", None) or "").split("-")[0]
            await message.reply_text(i18n.in_force().text("telegram.listening", code or i18n.SOURCE))
            return
        with self._pending_lock:
            question = self._questions.get(chat.id)
            answers = question is not None and not question.answered.is_set()
            if answers and not question.key:
                # The turn waiting in this chat asked a question: this message is its answer, not a new request.
                question.answer = message.text
                question.answered.set()
        if answers:
            if question.key:
                # In the one inbox: the first answer counts, on whichever way in it is given.
                await asyncio.to_thread(self._answer_listed, chat.id, question.key, message.text)
            return
        self._worker.submit(self._run_turn, chat.id, sender, message.text, message.message_id)

    def _sends_settled(self, wait_s: float = 10.0) -> None:
        with self._sends_noted:
            self._sends_noted.wait_for(lambda: self._in_flight == 0, timeout=wait_s)

    def _pair_or_ignore(self, chat_id: int, sender: str, text: str) -> None:
        try:
            with self.host.writing() as rt:
                paired = pairing.redeem(rt, channel=CHANNEL, chat_id=str(chat_id), sender=sender, text=text)
        except Exception as e:  # noqa: BLE001 - the bot goes on; the failure is said, and the chat stays out
            self._log(f"could not check a pairing code from chat {chat_id}: {type(e).__name__}: {e}")
            paired = False
        if not paired:
            # No reply at all: a stranger learns nothing, not even that the bot is alive.
            self._record_ignored(chat_id, sender, text)
            return
        self._allowed.add(chat_id)
        self._log(f"chat {chat_id} paired with a one-time code")
        self._send(chat_id, "Paired: this chat can now ask Metnos. Ask in plain words; actions that change the world ask you first.")

    def _record_ignored(self, chat_id: int, sender: str, text: str) -> None:
        try:
            record_ignored(self.host, channel=CHANNEL, chat_id=str(chat_id), sender=sender,
                           reason="chat not in [telegram] allowed_chats", text=text)
            self._log(f"ignored a message from chat {chat_id}: not in [telegram] allowed_chats")
        except Exception as e:  # noqa: BLE001 - the bot goes on; the failure is said
            self._log(f"could not record an ignored message from chat {chat_id}: {type(e).__name__}: {e}")

    def _run_turn(self, chat_id: int, sender: str, text: str, message_id: int | None = None) -> None:
        # The fixed texts of this turn (questions, time-outs, status lines) in the request's language.
        language = language_of(text, i18n.in_force().languages())
        if self._stopping or getattr(self.host, "stopping", False):
            # Taken before the stop and not started: no turn now, and the chat is told to ask again.
            self._notify(chat_id, i18n.in_force().text("telegram.stopping", language))
            return
        turn_id = ""
        typing = self._start_typing(chat_id)
        try:
            # Who the turn works for: the chat's pairing (the first chat the host, the others guests).
            principal = self.host.pair(CHANNEL, str(chat_id))
            # The actor names who wrote, as the seeds' audit line does ("sender"): a group chat has several.
            # A chat is one conversation, a pause of [conversation] idle_minutes or /new the start of the next.
            fresh = chat_id in self._fresh
            self._fresh.discard(chat_id)
            outcome = self.host.ask(text, approver=self._approver(chat_id, language, text), channel=CHANNEL, actor=f"telegram:{sender}",
                                    asker=self._asker(chat_id, language, text), principal=principal,
                                    conversation=f"{CHANNEL}:{chat_id}", new_conversation=fresh,
                                    # A schedule said in the chat is shown back with its next firings, saved on a yes.
                                    confirm_schedules=True)
            # An unverified answer is marked as such; a quarantined executor the request missed is named.
            reply = reply_text(outcome, language)
            # A message the turn sent that is still queued for a retry, or was given up, is said, not hidden.
            told = outgoing.notice(self.host.outbox, outcome.turn_id) if self._delivering else ""
            reply = f"{reply}\n\nmetnos: {told}" if told else reply
            turn_id = outcome.turn_id
        except MetnosError as e:
            reply = f"metnos: {i18n.said_error_or_as_raised(str(e), language)}"
        except Exception as e:  # noqa: BLE001 - the chat is told; the bot goes on
            self._log(f"unexpected error in a turn: {type(e).__name__}: {e}")
            reply = f"metnos: unexpected error ({type(e).__name__}); the turn is in the log"
        finally:
            typing.cancel()
        self._answer(chat_id, reply, message_id, turn_id)

    def _start_typing(self, chat_id: int) -> Any:
        """Show "typing" in the chat until the returned future is cancelled."""
        assert self._loop is not None

        async def typing() -> bool:
            try:
                await self._app.bot.send_chat_action(chat_id, "typing")
                return True
            except Exception as e:  # noqa: BLE001 - an indicator that fails never stops the turn
                self._log(f"could not show typing in chat {chat_id}: {redact(f'{type(e).__name__}: {e}', self._token)}")
                return False

        async def keep_typing(shown: bool) -> None:
            while shown:
                await asyncio.sleep(TYPING_EVERY_S)
                shown = await typing()

        # The first indicator is shown before the turn starts, so even a quick turn is seen to be worked on.
        shown = bool(self._call_quietly(typing()))
        return asyncio.run_coroutine_threadsafe(keep_typing(shown), self._loop)

    # Approvals -------------------------------------------------------------------
    # One inbox (metnos/services/approvals.py): the question waits in the host's broker, where the dashboard
    # and the API list it too; the buttons here are one more way to answer it, and the first answer counts.
    def _approver(self, chat_id: int, language: str = i18n.SOURCE,
                  request: str = "") -> Callable[[int, str, dict[str, Any], str], tuple[bool, str]]:
        def approve(step: int, executor: str, args: dict[str, Any], reason: str) -> tuple[bool, str]:
            return self._ask(chat_id, step, executor, args, reason, language, request)

        return approve

    def _ask(self, chat_id: int, step: int, executor: str, args: dict[str, Any], reason: str,
             language: str = i18n.SOURCE, request: str = "") -> tuple[bool, str]:
        # Deferred: as in _startup, which has always run before a question is asked.
        said = i18n.in_force()
        local = _Pending(chat_id)

        def present(approval: Any) -> None:
            local.key = approval.id
            with self._pending_lock:
                self._pending[approval.id] = local
            shown = orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
            text = said.text("telegram.approve_question", language, step=step, executor=executor, args=shown[:1500],
                             reason=i18n.said_words(reason, language))
            buttons = [[[said.text("telegram.approve", language), f"{APPROVE}:{approval.id}"],
                        [said.text("telegram.deny", language), f"{DENY}:{approval.id}"]]]

            def shown_as(message_id: int) -> None:
                with self._pending_lock:
                    local.message_id = message_id
                    closed = local.closed
                if closed:
                    # Answered elsewhere while the prompt was on its way: its buttons would answer nothing.
                    self._call_quietly(self._app.bot.edit_message_reply_markup(chat_id, message_id, reply_markup=None))

            local.queued, sent = self._prompt(chat_id, text, kind="approval", buttons=buttons, on_sent=shown_as)
            if not sent:
                # The question never reached the chat: the other ways in may still answer it; without any, nobody can.
                if self.approvals is getattr(self.host, "approvals", None):
                    self._log(f"the approval for chat {chat_id} could not be shown there; it waits on the dashboard")
                else:
                    self.approvals.answer(approval.id, approved=False, by="unreachable", channel=CHANNEL)
                return

        try:
            approved, by = self.approvals.ask(CHANNEL, step, executor, args, reason, request=request,
                                              timeout_s=self.settings.approval_timeout_s, present=present)
        finally:
            with self._pending_lock:
                self._pending.pop(local.key, None)
                local.closed = True
                shown_id = local.message_id
            dropped = self._let_go(local.queued)
        if by == f"{CHANNEL}:stopped" or by.startswith(f"{CHANNEL}:button"):
            return approved, by
        if shown_id is not None:
            self._call_quietly(self._app.bot.edit_message_reply_markup(chat_id, shown_id, reply_markup=None))
        # Shown, or on its way (its buttons are taken off as it lands): the chat hears how it was answered.
        seen = shown_id is not None or (bool(local.queued) and not dropped)
        if by == f"{CHANNEL}:timeout":
            self._send(chat_id, said.text("telegram.approval_timeout", language, seconds=f"{self.settings.approval_timeout_s:.0f}",
                                          executor=executor))
        elif seen:
            # Answered on another way in: the chat that was asked is told where, and what.
            verdict = said.text("telegram.approve" if approved else "telegram.deny", language)
            self._send(chat_id, f"{verdict}: {executor} ({by})")
        return approved, by

    # Questions ---------------------------------------------------------------------
    def _asker(self, chat_id: int, language: str = i18n.SOURCE, request: str = "") -> Callable[[Any], tuple[str | None, str]]:
        def ask(question: Any) -> tuple[str | None, str]:
            return self._question(chat_id, i18n.said_words(question.question, language), language, question, request)

        return ask

    def _question(self, chat_id: int, text: str, language: str = i18n.SOURCE, asked: Any = None,
                  request: str = "") -> tuple[str | None, str]:
        dialogs = getattr(self.host, "dialogs", None)
        if dialogs is not None and asked is not None:
            return self._question_in_inbox(dialogs, chat_id, asked, language, request)
        said = i18n.in_force()
        question = _Question()
        with self._pending_lock:
            self._questions[chat_id] = question
        try:
            queued, sent = self._prompt(chat_id, said.text("telegram.question", language, question=text), kind="question")
            if not sent:
                return None, "telegram:unreachable"
            answered = question.answered.wait(self.settings.approval_timeout_s)
            self._let_go(queued)
        finally:
            with self._pending_lock:
                if self._questions.get(chat_id) is question:
                    del self._questions[chat_id]
        if question.stopped:
            return None, "telegram:stopped"
        if not answered:
            self._send(chat_id, said.text("telegram.question_timeout", language, seconds=f"{self.settings.approval_timeout_s:.0f}"))
            return None, "telegram:timeout"
        return question.answer, "telegram:reply"

    def _question_in_inbox(self, dialogs: Any, chat_id: int, asked: Any, language: str, request: str) -> tuple[str | None, str]:
        """The question waits in the host's one inbox (the dashboard, the API and ``metnos inbox`` list it too) and
        is shown in the chat, whose next message answers it; the first answer, on any way in, counts."""
        said = i18n.in_force()
        local = _Question()
        queued = [""]

        def present(pending: Any) -> None:
            local.key = pending.id
            with self._pending_lock:
                self._questions[chat_id] = local
            queued[0], sent = self._prompt(chat_id, said.text("telegram.question", language, question=i18n.said_words(asked.question, language)),
                                         kind="question")
            if not sent:
                self._log(f"the question for chat {chat_id} could not be shown there; it waits on the dashboard and in `metnos inbox`")

        try:
            answer, by = dialogs.ask(CHANNEL, asked, request=request, timeout_s=self.settings.approval_timeout_s, present=present)
        finally:
            with self._pending_lock:
                if self._questions.get(chat_id) is local:
                    del self._questions[chat_id]
            self._let_go(queued[0])
        if local.stopped or by == f"{CHANNEL}:stopped":
            return None, f"{CHANNEL}:stopped"
        if answer is None:
            if by.endswith(":timeout"):
                self._send(chat_id, said.text("telegram.question_timeout", language, seconds=f"{self.settings.approval_timeout_s:.0f}"))
            return None, by
        if not by.startswith(f"{CHANNEL}:"):
            # Answered on another way in: the chat that was asked is told where, and what.
            self._send(chat_id, f"Answered on {by.partition(':')[0]} ({by}): {answer}")
        return answer, by

    # The inbox ------------------------------------------------------------------------
    def _show_inbox(self, chat_id: int, language: str = i18n.SOURCE) -> None:
        """/inbox: each item waiting for the user, whichever way in asked, as a message with what answers it,
        in ``language`` (the one the user's Telegram is set to, when the catalogue has it)."""
        said = i18n.in_force()
        if getattr(self.host, "dialogs", None) is None:
            self._notify(chat_id, said.text("telegram.inbox_no_daemon", language))
            return
        if self.host.approver_is_guest(CHANNEL, str(chat_id)):
            self._notify(chat_id, said.text("telegram.inbox_guest", language))
            return
        found = inbox.items(self.host)
        if not found:
            self._notify(chat_id, said.text("telegram.inbox_empty", language))
            return
        for item in found:
            self._show_item(chat_id, item, language=language)

    def _show_item(self, chat_id: int, item: dict[str, Any], heading: str = "", pushed: bool = False,
                   language: str = i18n.SOURCE) -> None:
        """One item of the inbox as a message in the chat (through the outbox), with what answers it: buttons, or a
        reply to the message for a question; in ``language``."""
        said = i18n.in_force()
        asked_for = said.text("telegram.inbox_for", language, request=item["request"]) if item.get("request") else ""
        if item["kind"] == inbox.APPROVAL:
            shown = orjson.dumps(item["args"], option=orjson.OPT_SORT_KEYS).decode()
            text = said.text("telegram.inbox_approval", language, channel=item["channel"], step=item["step"], executor=item["executor"],
                             args=shown[:1500], reason=i18n.said_words(item["reason"], language)) + asked_for
            buttons = [[[said.text("telegram.approve", language), f"{APPROVE}:{item['id']}"],
                        [said.text("telegram.deny", language), f"{DENY}:{item['id']}"]]]
        elif item["kind"] == inbox.QUESTION:
            text = said.text("telegram.inbox_question", language, channel=item["channel"],
                             question=i18n.said_words(item["question"], language)) + asked_for
            buttons = []
        else:
            text = said.text("telegram.inbox_undelivered", language, kind=item["message_kind"], channel=item["channel"],
                             address=item["address"], attempts=item["attempts"], cause=item["cause"], text=item["text"])
            buttons = [[[said.text("telegram.retry", language), f"{RETRY}:{item['id']}"],
                        [said.text("telegram.dismiss", language), f"{DISMISS}:{item['id']}"]]]

        def listed(message_id: int) -> None:
            if item["kind"] == inbox.QUESTION:
                # A reply to this message answers the question, whichever way in asked it.
                self._listed_questions[(chat_id, message_id)] = item["id"]

        self._prompt(chat_id, f"{heading}{text}", kind="inbox", buttons=buttons or None, on_sent=listed,
                     item=item["id"] if pushed else "")

    # Pushing the inbox --------------------------------------------------------------------
    def _push_loop(self) -> None:
        while not self._push_stop.wait(PUSH_EVERY_S):
            try:
                self._push_new()
            except Exception as e:  # noqa: BLE001 - a push that fails is said and tried at the next look
                self._log(f"could not tell the host's chats of the inbox: {type(e).__name__}: {redact(str(e), self._token)}")

    def _push_new(self) -> None:
        """Tell the host's chats of each item newly waiting in the inbox, once: an approval or a question asked on
        another way in (those asked here are in their chat already), a message given up (not one of these
        notices, which would tell of itself)."""
        fresh = [item for item in inbox.items(self.host) if item["id"] not in self._pushed and pushable(item)]
        if not fresh:
            return
        chats = [chat for chat in sorted(self._allowed) if not self.host.approver_is_guest(CHANNEL, str(chat))]
        for item in fresh:
            self._pushed.add(item["id"])
            for chat in chats:
                self._show_item(chat, item, heading=PUSHED, pushed=True)

    def _answer_listed(self, chat_id: int, key: str, text: str) -> None:
        """A chat's answer to a question of the inbox; a second answer is told where the first came from."""
        try:
            inbox.answer(self.host, key, channel=CHANNEL, by="reply", text=text)
        except PendingUnknown as e:
            self._notify(chat_id, f"metnos: {e}")

    async def _on_button(self, update: Any, context: Any) -> None:
        query = update.callback_query
        verdict, _, key = (query.data or "").partition(":")
        chat_id = query.message.chat.id if query.message is not None else None
        with self._pending_lock:
            pending = self._pending.get(key)
        if pending is None and verdict in (APPROVE, DENY, RETRY, DISMISS) and chat_id in self._allowed:
            # A button /inbox showed: an item of the one inbox, whichever way in it came from.
            await self._on_inbox_button(query, chat_id, verdict, key)
            return
        # Only the chat that was asked can answer here, and only once (whichever way in answers first).
        if pending is None or verdict not in (APPROVE, DENY) or chat_id != pending.chat_id or chat_id not in self._allowed:
            await query.answer("This approval is no longer open.")
            return
        try:
            await asyncio.to_thread(self.approvals.answer, key, approved=verdict == APPROVE, by="button", channel=CHANNEL)
        except ApprovalUnknown as e:
            await query.answer(str(e)[:190])
            return
        said = "Approved" if verdict == APPROVE else "Denied"
        await query.answer(said)
        try:
            await query.edit_message_reply_markup(reply_markup=None)
        except Exception as e:  # noqa: BLE001 - the answer counts even if the buttons stay
            self._log(f"could not remove the buttons: {redact(str(e), self._token)}")

    async def _on_inbox_button(self, query: Any, chat_id: int, verdict: str, key: str) -> None:
        closed = "This approval is no longer open." if verdict in (APPROVE, DENY) else "This message is no longer undelivered."
        if getattr(self.host, "dialogs", None) is None:
            # A host without the one inbox (a channel on its own): only the chat's own approvals, and this one ended.
            await query.answer(closed)
            return
        if await asyncio.to_thread(self.host.approver_is_guest, CHANNEL, str(chat_id)):
            await query.answer("This chat is paired as a guest, and a guest answers nothing of the host's inbox.")
            return
        fields: dict[str, Any] = ({"approve": verdict == APPROVE} if verdict in (APPROVE, DENY)
                                  else {"action": "retry" if verdict == RETRY else "dismiss"})
        try:
            await asyncio.to_thread(lambda: inbox.answer(self.host, key, channel=CHANNEL, by="button", **fields))
        except AlreadyAnswered as e:
            # The first answer counts: the chat is told where it came from.
            await query.answer(str(e)[:190])
            return
        except PendingUnknown:
            await query.answer(closed)
            return
        await query.answer({APPROVE: "Approved", DENY: "Denied", RETRY: "Queued again", DISMISS: "Dismissed"}[verdict])
        try:
            await query.edit_message_reply_markup(reply_markup=None)
        except Exception as e:  # noqa: BLE001 - the answer counts even if the buttons stay
            self._log(f"could not remove the buttons: {redact(str(e), self._token)}")

    # Sending -------------------------------------------------------------------------
    def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=self.settings.timeout_s + 30)

    def _call_quietly(self, coro: Coroutine[Any, Any, Any]) -> Any:
        try:
            return self._call(coro)
        except Exception as e:  # noqa: BLE001 - logged, redacted; the turn goes on
            self._log(f"the Bot API refused a call: {redact(f'{type(e).__name__}: {e}', self._token)}")
            return None

    def _send(self, chat_id: int, text: str) -> None:
        self._notify(chat_id, text)

    def _notify(self, chat_id: int, text: str) -> None:
        """A notice of the channel's own (a time-out, a pairing, the daemon stopping), through the outbox."""
        if self._delivering:
            self._queue(chat_id, text, kind="notice")
        else:
            self._call_quietly(self._app.bot.send_message(chat_id, clip(text)))

    def _answer(self, chat_id: int, text: str, message_id: int | None, turn_id: str) -> None:
        """A turn's answer, through the outbox: should the Bot API be down, it is sent when it is back."""
        if self._delivering:
            self._queue(chat_id, text, kind="answer", turn_id=turn_id, reply_to=message_id)
        else:
            self._reply(chat_id, text, message_id)

    def _queue(self, chat_id: int, text: str, *, kind: str, turn_id: str = "", reply_to: int | None = None) -> None:
        try:
            self.host.outbox.queue(channel=CHANNEL, address=str(chat_id), text=text, kind=kind, turn_id=turn_id,
                                   reply_to="" if reply_to is None else str(reply_to))
        except Exception as e:  # noqa: BLE001 - without the log, the message is still sent, once, as before the outbox
            self._log(f"could not queue a {kind} for chat {chat_id} ({type(e).__name__}: {e}); sending it at once")
            self._reply(chat_id, text, reply_to)

    def _deliver(self, message: Any) -> str:
        """The outbox's sender: one message as formatted HTML (plain text if the markup is refused); its message id.
        Any other failure raises DeliveryFailed with a cause fit for the log (the token redacted)."""
        from telegram import ReplyParameters  # deferred: as in _startup, which has always run before a delivery

        chat_id = int(message.address)
        thread = ReplyParameters(int(message.reply_to), allow_sending_without_reply=True) if message.reply_to else None
        limits = {"read_timeout": self.settings.timeout_s, "write_timeout": self.settings.timeout_s,
                  "connect_timeout": self.settings.timeout_s, "reply_markup": self._markup((message.options or {}).get("buttons"))}
        with self._sends_noted:
            self._in_flight += 1
        try:
            return self._send_noted(message, chat_id, thread, limits)
        finally:
            with self._sends_noted:
                self._in_flight -= 1
                self._sends_noted.notify_all()

    def _send_noted(self, message: Any, chat_id: int, thread: Any, limits: dict[str, Any]) -> str:
        from telegram.error import BadRequest  # deferred: as in _startup, which has always run before a delivery

        try:
            try:
                sent = self._call(self._app.bot.send_message(chat_id, fitted_html(message.text), parse_mode=PARSE_MODE,
                                                             reply_parameters=thread, **limits))
            except BadRequest as e:
                self._log(f"the Bot API refused the formatted message, sending it as plain text: {redact(str(e), self._token)}")
                sent = self._call(self._app.bot.send_message(chat_id, clip(message.text), reply_parameters=thread, **limits))
        except Exception as e:  # noqa: BLE001 - the outbox records the cause and tries again later
            raise DeliveryFailed(f"the Bot API at {self.settings.base_url}: {redact(f'{type(e).__name__}: {e}', self._token)}") from None
        with self._on_sent_lock:
            shown = self._on_sent.pop(str(message.id), None)
        if shown is not None:
            shown(sent.message_id)
        return str(sent.message_id)

    @staticmethod
    def _markup(buttons: Any) -> Any:
        """Inline buttons from rows of ``[label, callback data]``; None for none."""
        if not buttons:
            return None
        from telegram import InlineKeyboardButton, InlineKeyboardMarkup  # deferred: as in _startup

        return InlineKeyboardMarkup([[InlineKeyboardButton(label, callback_data=data) for label, data in row] for row in buttons])

    def _prompt(self, chat_id: int, text: str, *, kind: str, buttons: Any = None,
                on_sent: Callable[[int], None] | None = None, item: str = "") -> tuple[str, bool]:
        """A prompt (an approval's buttons, a question, an item of the inbox) through the outbox, so that a Bot API
        that is down delays it (retried, then in the inbox) instead of losing it. Its outbox id ("" when it went
        straight out), and whether it is on its way; ``on_sent`` gets its Telegram message id once sent."""
        if self._delivering:
            try:
                # ``pushed``: the item of the inbox this message told of, so that a restart does not tell it again.
                options = {**({"buttons": buttons} if buttons else {}), **({"pushed": item} if item else {})}
                with self._on_sent_lock:
                    queued = self.host.outbox.queue(channel=CHANNEL, address=str(chat_id), text=text, kind=kind,
                                                    options=options or None)
                    if on_sent is not None:
                        self._on_sent[queued] = on_sent
            except Exception as e:  # noqa: BLE001 - without the log, the prompt is still sent, once, straight out
                self._log(f"could not queue a {kind} for chat {chat_id} ({type(e).__name__}: {e}); sending it at once")
            else:
                return queued, True
        sent = self._call_quietly(self._app.bot.send_message(chat_id, clip(text), reply_markup=self._markup(buttons)))
        if sent is not None and on_sent is not None:
            on_sent(sent.message_id)
        return "", sent is not None

    def _let_go(self, queued: str) -> bool:
        """A prompt whose approval or question closed before it went out is not sent after; True if let go."""
        if queued and self.host.outbox.drop(queued, by=f"{CHANNEL}:closed-before-sent"):
            with self._on_sent_lock:
                self._on_sent.pop(queued, None)
            return True
        return False

    def _reply(self, chat_id: int, text: str, message_id: int | None) -> None:
        """The answer as formatted HTML, threaded to the request; as plain text if the markup is refused."""
        from telegram import ReplyParameters  # deferred: as in _startup, which has always run before a reply

        # A request deleted meanwhile must not cost the answer: the reply then goes unthreaded.
        thread = ReplyParameters(message_id, allow_sending_without_reply=True) if message_id is not None else None
        try:
            self._call(self._app.bot.send_message(chat_id, fitted_html(text), parse_mode=PARSE_MODE, reply_parameters=thread))
            return
        except Exception as e:  # noqa: BLE001 - said, then the plain text is tried
            self._log(f"the Bot API refused the formatted answer, sending it as plain text: {redact(f'{type(e).__name__}: {e}', self._token)}")
        self._call_quietly(self._app.bot.send_message(chat_id, clip(text), reply_parameters=thread))


def pushable(item: dict[str, Any]) -> bool:
    """Whether an item of the inbox is pushed to the host's chats: not one asked in a chat (shown there already),
    not a prompt of the channel given up (telling of it would be one more prompt to give up)."""
    if item["kind"] in (inbox.APPROVAL, inbox.QUESTION):
        return item.get("channel") != CHANNEL
    return item.get("message_kind") not in PROMPTS


def pushed_before(runtime: Any) -> set[str]:
    """The items of the inbox a push told of already, from the log (a push is a message queued naming its item)."""
    topic = get_topic(OutgoingMessage.MessageQueued)
    return {str(e.options["pushed"]) for _, e in runtime.log.domain_events(topics=(topic,))
            if e.kind == "inbox" and isinstance(e.options, dict) and e.options.get("pushed")}


def channel(host: Any) -> TelegramChannel | None:
    """The daemon's hook (metnos/services/extensions.py): the channel when ``[telegram] allowed_chats`` names a chat.

    Without allowed chats, and without a pairing code or paired chat in the
    log (``metnos telegram pair``), there is nobody to serve (``[telegram.chat_ids]``
    alone only tells send_messages where to send). A configured channel whose
    token variable is empty is an error that stops the daemon, naming it.
    """
    settings = for_workspace(host.runtime.workspace, getattr(host, "_given_env", None)).settings.telegram
    if not settings.allowed_chats and not pairing.on_record(host.runtime, channel=CHANNEL):
        return None
    return TelegramChannel(host, settings, env=host.env)
