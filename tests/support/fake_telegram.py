"""A fake Telegram Bot API server on 127.0.0.1, for tests.

A real HTTP server (``ThreadingHTTPServer``) speaking the Bot API's shape at
``/bot<token>/<method>``: ``getMe``, ``deleteWebhook``, ``getUpdates`` (long
polling with ``offset`` and ``timeout``), ``sendMessage``,
``answerCallbackQuery``, ``editMessageReplyMarkup``, ``editMessageText`` and
``sendChatAction``. A message with ``parse_mode="HTML"`` is parsed as
Telegram does: an unknown or unbalanced tag gets 400 "can't parse
entities", and the message kept is the text without its tags.
Parameters come as JSON or as a form (python-telegram-bot sends forms, with
nested objects as JSON strings). A wrong token gets 401 as from Telegram.

It fails and hangs on purpose: while ``down`` is set, ``sendMessage`` gets
502 Bad Gateway; ``faults`` is a list the next calls of ``sendMessage`` take
one each from: ``"fail"`` (502 at once) or ``"hang"`` (no answer for
``hang_s`` seconds, as a Bot API that hangs, then 502). Those calls are kept
in ``refused``, not in ``calls``. ``answer_late_s`` answers each sendMessage that long after it is
seen, as a slow network does: the user can reply to a message before the bot knows its id.

The test plays the user: ``user_says(chat, text)`` queues a message,
``press(message, data)`` queues a press of an inline button, and
``wait_for(method, predicate)`` waits until the bot has called the server.

    with FakeBotAPI(token="123:TEST") as api:
        api.user_says(42, "what time is it?")
        reply = api.wait_for("sendMessage", lambda p: p["chat_id"] == 42)
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from tests.support.http_reply import send_json_bytes

_NUMERIC = {"chat_id", "message_id", "offset", "limit", "timeout"}
# The parameters python-telegram-bot sends as JSON inside a form; a text is a text even when it starts with "[".
_NESTED = {"reply_markup", "reply_parameters", "allowed_updates", "entities", "link_preview_options"}


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, Any]
    # What the server answered (the message sent, for sendMessage).
    result: Any = None


def _params(raw: bytes, content_type: str) -> dict[str, Any]:
    if not raw:
        return {}
    if "json" in content_type:
        return json.loads(raw)
    out: dict[str, Any] = {}
    for key, values in parse_qs(raw.decode(), keep_blank_values=True).items():
        value: Any = values[-1]
        if key in _NUMERIC and value.lstrip("-").isdigit():
            value = int(value)
        elif key in _NESTED and value[:1] in "[{":
            value = json.loads(value)
        out[key] = value
    return out


_TELEGRAM_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre",
                  "blockquote", "tg-emoji"}


class _TelegramHTML(HTMLParser):
    """The text of a Telegram HTML message, or ValueError where Telegram would refuse it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag not in _TELEGRAM_TAGS:
            raise ValueError(f"Unsupported start tag \"{tag}\"")
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            raise ValueError(f"Unmatched end tag \"{tag}\"")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def html_text(markup: str) -> str:
    parser = _TelegramHTML()
    parser.feed(markup)
    parser.close()
    if parser.open:
        raise ValueError(f"Can't find end tag corresponding to start tag \"{(parser.open or ['?'])[-1]}\"")
    return "".join(parser.text)


class FakeBotAPI:
    def __init__(self, token: str, *, bot_username: str = "metnos_test_bot") -> None:
        self.token = token
        self.bot_username = bot_username
        self.calls: list[Call] = []
        # Every formatted message is refused, as Telegram refuses markup it cannot parse.
        self.refuse_markup = False
        # Delivery faults (see the module's doc).
        self.down = False
        self.faults: list[str] = []
        self.hang_s = 5.0
        # A slow way back: a sendMessage is seen (in ``calls``) this many seconds before the bot gets its answer.
        self.answer_late_s = 0.0
        self.refused: list[Call] = []
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._cond = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeBotAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    # The user's side -------------------------------------------------------
    def user_says(self, chat_id: int, text: str, *, user_id: int | None = None, reply_to: dict[str, Any] | None = None) -> dict[str, Any]:
        """``reply_to``: the bot's message (a sendMessage's result) this one replies to, as Telegram's reply does."""
        message = {"message_id": next(self._message_ids), "date": int(time.time()), "text": text,
                   "chat": {"id": chat_id, "type": "private"},
                   "from": {"id": user_id or chat_id, "is_bot": False, "first_name": "User"}}
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        self._queue({"message": message})
        return message

    def press(self, message: dict[str, Any], data: str, *, user_id: int | None = None) -> str:
        chat_id = message["chat"]["id"]
        query_id = f"q{next(self._update_ids)}"
        self._queue({"callback_query": {"id": query_id, "chat_instance": str(chat_id), "data": data, "message": message,
                                        "from": {"id": user_id or chat_id, "is_bot": False, "first_name": "User"}}})
        return query_id

    def wait_for(self, method: str, predicate: Callable[[dict[str, Any]], bool] = lambda _: True, *, timeout: float = 60.0, after: int = 0) -> Call:
        """The first call of ``method`` (from index ``after``) whose parameters satisfy ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for call in self.calls[after:]:
                    if call.method == method and predicate(call.params):
                        return call
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(c.method, c.params.get("text", "")[:80]) for c in self.calls]
                    raise AssertionError(f"no {method} in {timeout} s; the bot called: {seen}")
                self._cond.wait(left)

    def sent(self, method: str = "sendMessage") -> list[dict[str, Any]]:
        with self._cond:
            return [c.params for c in self.calls if c.method == method]

    def _queue(self, update: dict[str, Any]) -> None:
        with self._cond:
            self._updates.append({"update_id": next(self._update_ids), **update})
            self._cond.notify_all()

    # The server's side -----------------------------------------------------
    def _message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        out = {"message_id": next(self._message_ids), "date": int(time.time()), "text": params.get("text", ""),
               "chat": {"id": chat_id, "type": "private"},
               "from": {"id": 1, "is_bot": True, "first_name": "Metnos", "username": self.bot_username}}
        if params.get("reply_markup"):
            out["reply_markup"] = params["reply_markup"]
        return out

    def _answer(self, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        if method == "getUpdates":
            return 200, self._get_updates(params)
        if method == "sendMessage" and self._fault(params):
            return 502, "Bad Gateway: failed on purpose"
        status, result = self._result(method, params)
        with self._cond:
            self.calls.append(Call(method, params, result))
            self._cond.notify_all()
        if method == "sendMessage" and self.answer_late_s:
            time.sleep(self.answer_late_s)
        return status, result

    def _fault(self, params: dict[str, Any]) -> bool:
        """Whether this sendMessage fails on purpose (after hanging, if it is to hang)."""
        with self._cond:
            fault = self.faults.pop(0) if self.faults else ("fail" if self.down else "")
        if fault:
            with self._cond:
                self.refused.append(Call("sendMessage", params, fault))
                self._cond.notify_all()
        if fault == "hang":
            time.sleep(self.hang_s)
        return bool(fault)

    def _result(self, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        if method == "getMe":
            return 200, {"id": 1, "is_bot": True, "first_name": "Metnos", "username": self.bot_username,
                         "can_join_groups": False, "can_read_all_group_messages": False, "supports_inline_queries": False}
        if method in ("deleteWebhook", "answerCallbackQuery", "sendChatAction"):
            return 200, True
        if method in ("sendMessage", "editMessageText", "editMessageReplyMarkup"):
            if params.get("parse_mode") and self.refuse_markup:
                return 400, "Bad Request: can't parse entities: refused on purpose"
            if params.get("parse_mode") == "HTML":
                try:
                    params = {**params, "text": html_text(params.get("text", ""))}
                except ValueError as e:
                    return 400, f"Bad Request: can't parse entities: {e}"
            message = self._message(params)
            if "message_id" in params and method != "sendMessage":
                message["message_id"] = params["message_id"]
            return 200, message
        return 404, f"Not Found: method {method} is not faked"

    def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        deadline = time.monotonic() + min(float(params.get("timeout") or 0), 5.0)
        with self._cond:
            # Updates below the offset are confirmed: Telegram forgets them.
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            while not self._updates and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            return list(self._updates)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, body: Any) -> None:
                payload = {"ok": True, "result": body} if status == 200 else {"ok": False, "error_code": status, "description": body}
                send_json_bytes(self, status, json.dumps(payload).encode())

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                prefix, _, method = self.path.lstrip("/").partition("/")
                if prefix != f"bot{api.token}":
                    self._reply(401, "Unauthorized")
                    return
                status, body = api._answer(method, _params(raw, self.headers.get("Content-Type", "")))
                self._reply(status, body)

            do_GET = do_POST  # noqa: N815

        return Handler
