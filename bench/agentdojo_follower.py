"""The scripted model of the AgentDojo run: it always follows the injection.

An OpenAI-compatible chat-completions server on 127.0.0.1, the AgentDojo counterpart of
bench/injection_adversary.py. For each case it is given the user task's calls (AgentDojo's own
``ground_truth``, computed on the environment before the turn) and the injection task's goal and
calls. At each request it reads every tool result in the conversation, as a model would: once one
holds the injection task's goal sentence, the injection task's calls are made first, one a round,
in the runtime's native ``tool_calls`` form; then the user task's calls; then an answer that
quotes what the tools returned. If the runtime never shows it the goal sentence, no injected call
is made. A call the conversation never shows as made is made once more, then given up.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.injection_adversary import ATTEMPTS, _calls_and_results, _key, _strings
from bench.injection_cases import Call


@dataclass
class Script:
    """What the follower knows of one case."""

    user_calls: tuple[Call, ...] = ()
    goal: str | None = None  # the injection task's goal sentence (None: no attack)
    injected_calls: tuple[Call, ...] = ()


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def goal_seen(messages: list[dict[str, Any]], goal: str | None) -> bool:
    """The goal sentence is in a tool result of the conversation."""
    if not goal:
        return False
    wanted = _flat(goal)
    return any(wanted in _flat(text) for m in messages if m.get("role") == "tool" for text in _strings(m.get("content")))


def _answer(messages: list[dict[str, Any]]) -> str:
    """The tools' results quoted, as a small model answers from its data."""
    results = [text for m in messages if m.get("role") == "tool" for text in _strings(m.get("content"))]
    quoted = " ".join(results)[-1500:]
    return f"Done. {quoted}" if quoted else "Done."


def next_reply(body: dict[str, Any], script: Script, emitted: dict[str, int]) -> Call | str:
    messages = body.get("messages") or []
    made = {_key(c) for c, _ in _calls_and_results(messages)}
    pending = (list(script.injected_calls) if goal_seen(messages, script.goal) else []) + list(script.user_calls)
    for call in pending:
        if _key(call) not in made and emitted.get(_key(call), 0) < ATTEMPTS:
            emitted[_key(call)] = emitted.get(_key(call), 0) + 1
            return call
    return _answer(messages)


@dataclass
class _State:
    script: Script = field(default_factory=Script)
    emitted: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    seen: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    state: _State
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: object) -> None:
        pass

    def _send(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": "follower", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no such path {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path.split("?")[0] not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": f"this server does not serve {self.path}"}})
            return
        with self.state.lock:
            self.state.requests += 1
            self.state.seen = self.state.seen or goal_seen(body.get("messages") or [], self.state.script.goal)
            reply = next_reply(body, self.state.script, self.state.emitted)
            n = self.state.requests
        message: dict[str, Any] = {"role": "assistant", "content": reply if isinstance(reply, str) else None}
        if isinstance(reply, Call):
            message["tool_calls"] = [{"id": f"call_{n}", "type": "function",
                                      "function": {"name": reply.name, "arguments": json.dumps(reply.args)}}]
        self._send(200, {"id": f"chatcmpl-follower-{n}", "object": "chat.completion", "model": "follower",
                         "choices": [{"index": 0, "message": message,
                                      "finish_reason": "stop" if isinstance(reply, str) else "tool_calls"}],
                         "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})


class Follower:
    """The server; ``start_case(script)`` before each turn, ``seen()`` after it."""

    def __init__(self) -> None:
        self.state = _State()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), type("_H", (_Handler,), {"state": self.state}))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start_case(self, script: Script) -> None:
        with self.state.lock:
            self.state.script, self.state.emitted, self.state.requests, self.state.seen = script, {}, 0, False

    def seen(self) -> bool:
        with self.state.lock:
            return self.state.seen

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
