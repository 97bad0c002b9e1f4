"""A real HTTP LLM server on 127.0.0.1 that plays a script, for tests.

It speaks both wire formats, picked by path: POST /v1/chat/completions
(OpenAI-compatible) and POST /v1/messages (Anthropic). Each request takes the
next step of the script; every request is recorded so a test can assert what
the runtime sent.

    with ScriptedLLM([call("read_files", {"paths": ["x"]}), text("answer")]) as llm:
        env["METNOS_LLM_URL"] = llm.url          # for the CLI, in another process
        ...
        assert llm.requests[1].body["messages"][-1]["role"] == "tool"

Steps: ``text(s)``, ``call(name, args)``, ``call_raw(name, "{not json")``, ``calls(call(...), call(...))``,
``text_call(name, args)`` (the call written as fenced JSON in the text),
``http_error(status, message)``, ``malformed(body)``, ``hang_up()`` (close
the connection without an answer); ``slow(step, seconds)`` delays any of them.
A step may also be a function of the request (``Recorded``) returning a step.
When the script runs out, the server answers HTTP 500 "script exhausted".

``llama_cpp=True`` (or $SCRIPTED_LLM_AS_LLAMA_CPP=1 for every scripted server of a run)
makes it answer /props as llama.cpp does, so the provider sends the round's grammar; a
request that carries one gets its scripted reply the way llama.cpp would give it under
the grammar (a call as fenced text), and a scripted reply that the grammar would not
admit is answered HTTP 500 naming why: run a test file so, and the tests that fail are
the ones whose replies, and the loop's checks on them, cannot happen under the grammar.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Union

import pytest

from tests.support.http_reply import send_json_bytes

AS_LLAMA_CPP_ENV = "SCRIPTED_LLM_AS_LLAMA_CPP"

Dialect = Literal["openai", "anthropic", "any"]
_PATHS = {"/v1/chat/completions": "openai", "/chat/completions": "openai", "/v1/messages": "anthropic"}


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: dict[str, Any]
    id: str | None = None
    # The arguments exactly as sent, when they are not JSON (OpenAI dialect only).
    raw_arguments: str | None = None


@dataclass(frozen=True)
class Step:
    kind: Literal["reply", "http_error", "malformed", "hang_up"]
    text: str = ""
    calls: tuple[ScriptedCall, ...] = ()
    status: int = 200
    body: str = ""
    delay_s: float = 0.0


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    dialect: str
    headers: dict[str, str]
    body: Any  # the parsed JSON, or the raw text when it is not JSON

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        tools = self.body.get("tools", []) if isinstance(self.body, dict) else []
        return [t["function"]["name"] if "function" in t else t["name"] for t in tools]


ScriptItem = Union[Step, Callable[[Recorded], Step]]


def text(s: str) -> Step:
    return Step("reply", text=s)


def call(name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None) -> Step:
    return Step("reply", calls=(ScriptedCall(name, dict(arguments or {}), id),))


def call_raw(name: str, raw_arguments: str) -> Step:
    """A native call whose arguments string is sent as given (e.g. not valid JSON)."""
    return Step("reply", calls=(ScriptedCall(name, {}, None, raw_arguments),))


def calls(*steps: Step, text: str = "") -> Step:
    return Step("reply", text=text, calls=tuple(c for s in steps for c in s.calls))


def text_call(name: str, arguments: dict[str, Any], *, fenced: bool = True) -> Step:
    payload = json.dumps({"name": name, "arguments": arguments})
    return Step("reply", text=f"```json\n{payload}\n```" if fenced else payload)


def http_error(status: int, message: str = "scripted failure") -> Step:
    return Step("http_error", status=status, body=json.dumps({"error": {"type": "scripted", "message": message}}))


def malformed(body: str = "{this is not json") -> Step:
    return Step("malformed", body=body)


def hang_up() -> Step:
    return Step("hang_up")


def slow(step: Step, seconds: float) -> Step:
    return replace(step, delay_s=seconds)


@dataclass
class _State:
    script: list[ScriptItem]
    dialect: Dialect
    model: str
    # Answer GET /props as llama.cpp's server does (a build_info), so a provider takes it for one.
    llama_cpp: bool = False
    requests: list[Recorded] = field(default_factory=list)
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ScriptedLLM:
    def __init__(self, script: Sequence[ScriptItem] = (), *, dialect: Dialect = "any", model: str = "scripted-model",
                 llama_cpp: bool | None = None) -> None:
        if llama_cpp is None:
            llama_cpp = os.environ.get(AS_LLAMA_CPP_ENV) == "1"
        self._state = _State(list(script), dialect, model, llama_cpp)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server, "the scripted LLM is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[Recorded]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def remaining(self) -> int:
        with self._state.lock:
            return len(self._state.script) - self._state.served

    def add(self, *steps: ScriptItem) -> None:
        with self._state.lock:
            self._state.script.extend(steps)

    def start(self) -> ScriptedLLM:
        handler = type("_Handler", (_Handler,), {"state": self._state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    state: _State
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: object) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        if self.path in ("/health", "/v1/health"):
            self._send(200, {"status": "ok"})
        elif self.path == "/props" and self.state.llama_cpp:
            self._send(200, {"build_info": "scripted", "default_generation_settings": {}})
        elif self.path in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": self.state.model, "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no such path {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", errors="replace")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        dialect = _PATHS.get(self.path.split("?")[0])
        if dialect is None or self.state.dialect not in ("any", dialect):
            self._send(404, {"error": {"message": f"this scripted server does not serve {self.path}"}})
            return
        recorded = Recorded("POST", self.path, dialect, {k.lower(): v for k, v in self.headers.items()}, body)
        with self.state.lock:
            self.state.requests.append(recorded)
            index = self.state.served
            item = self.state.script[index] if index < len(self.state.script) else None
            if item is not None:
                self.state.served += 1
        if item is None:
            self._send(500, {"error": {"message": f"scripted LLM: script exhausted after {index} replies"}})
            return
        step = item(recorded) if callable(item) else item
        if step.delay_s:
            time.sleep(step.delay_s)
        if step.kind == "hang_up":
            self.close_connection = True
            self.connection.close()
            return
        if step.kind == "malformed":
            self._send_bytes(200, step.body.encode())
            return
        if step.kind == "http_error":
            self._send_bytes(step.status, step.body.encode())
            return
        grammar = body.get("grammar") if isinstance(body, dict) and dialect == "openai" else None
        if isinstance(grammar, str):
            step, broken = under_grammar(step, grammar)
            if broken is not None:
                self._send(500, {"error": {"message": f"scripted LLM: the scripted reply breaks the grammar: {broken}"}})
                return
        reply = _openai_reply if dialect == "openai" else _anthropic_reply
        self._send(200, reply(step, index, self.state.model))

    def _send(self, status: int, obj: Any) -> None:
        self._send_bytes(status, json.dumps(obj).encode())

    def _send_bytes(self, status: int, data: bytes) -> None:
        send_json_bytes(self, status, data)


def _openai_reply(step: Step, index: int, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if step.calls:
        message["tool_calls"] = [
            {"id": c.id or f"call_{index}_{i}", "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments) if c.raw_arguments is None else c.raw_arguments}}
            for i, c in enumerate(step.calls)
        ]
    return {
        "id": f"chatcmpl-scripted-{index}",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if step.calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _anthropic_reply(step: Step, index: int, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
    content += [{"type": "tool_use", "id": c.id or f"toolu_{index}_{i}", "name": c.name, "input": c.arguments} for i, c in enumerate(step.calls)]
    return {
        "id": f"msg_scripted_{index}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if step.calls else "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


@pytest.fixture
def scripted_llm() -> Iterator[Callable[..., ScriptedLLM]]:
    """A factory: ``llm = scripted_llm([text("hi")], dialect="openai")``, stopped after the test."""
    started: list[ScriptedLLM] = []

    def make(script: Sequence[ScriptItem] = (), **kw: Any) -> ScriptedLLM:
        llm = ScriptedLLM(script, **kw).start()
        started.append(llm)
        return llm

    yield make
    for llm in started:
        llm.stop()


_JSON_RULE = re.compile(r"^(?:call_json|reply_json): %json (?P<schema>.+)$", re.MULTILINE)
_ANSWER_RULE = re.compile(r"^ANSWER: /(?P<pattern>.*)/$", re.MULTILINE)


def under_grammar(step: Step, grammar: str) -> tuple[Step, str | None]:
    """The step as llama.cpp would send it under ``grammar`` (Metnos's: metnos/mechanisms/llm/constraint.py),
    or why the grammar would not let the model write it."""
    import jsonschema

    found = _JSON_RULE.search(grammar)
    schema = json.loads(found.group("schema")) if found else None
    answer = _ANSWER_RULE.search(grammar)
    if step.kind != "reply":
        return step, None
    if step.calls:
        if len(step.calls) > 1:
            return step, "more than one call"
        c = step.calls[0]
        if c.raw_arguments is not None:
            return step, f"arguments that are not JSON: {c.raw_arguments[:60]}"
        if schema is None or not found or found.group(0).startswith("reply_json"):
            return step, f"a call to {c.name} where only words are admitted"
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors({"name": c.name, "arguments": c.arguments}))
        if error is not None:
            return step, f"a call the round does not admit ({c.name}: {error.message})"
        return replace(step, calls=(), text="```json\n" + json.dumps({"name": c.name, "arguments": c.arguments}) + "\n```"), None
    if found and found.group(0).startswith("reply_json"):
        try:
            data = json.loads(step.text)
        except ValueError:
            return step, "a reply that is not the JSON asked for"
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
        return step, None if error is None else f"a reply off the schema ({error.message})"
    if step.text.startswith("```json\n") and schema is not None:
        try:
            data = json.loads(step.text.strip()[len("```json"):-3])
        except ValueError:
            return step, "a fenced call that is not JSON"
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
        return step, None if error is None else f"a call the round does not admit ({error.message})"
    if answer is not None and re.fullmatch(answer.group("pattern"), step.text) is None:
        return step, f"words the answer grammar does not admit: {step.text[:60]!r}"
    return step, None
