"""The chat template llama.cpp really serves a model with: the GGUF's own for a model that is not one
of Metnos's sizes, Metnos's for the sizes, asked of the running server (/props, /apply-template).

The model is a llama of some 50 KB written in the test (tests/support/gguf_files.py), every weight
zero: llama.cpp loads it in a fraction of a second; the embedded model itself is not started. It needs
the xllamacpp extra, like every test of the embedded server.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from metnos.mechanisms.llm.embedded import BUILTIN_TEMPLATE, EmbeddedServer, chat_template_path, xllamacpp_available
from metnos.mechanisms.llm.model_files import MODELS
from tests.support.embedded import REQUIRE_ENV
from tests.support.gguf_files import write_tiny_llama



@pytest.fixture(autouse=True)
def xllamacpp_or_skip() -> None:
    """Skipped without the extra; a failure instead where the embedded step requires it (as tests/support/embedded.py)."""
    if not xllamacpp_available():
        problem = "needs the xllamacpp extra: pip install -e '.[embedded]'"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set but this test {problem}")
        pytest.skip(problem)


OWN = "{% for m in messages %}[tiny:{{ m.role }}] {{ m.content }}\n{% endfor %}"
HELLO = {"messages": [{"role": "user", "content": "hello there"}]}


def served(path: Path, tmp_path: Path) -> tuple[list[str], dict, str]:
    """The server's argv, its /props, and the prompt it renders for one user message."""
    server = EmbeddedServer(path, n_ctx=256, threads=1, log_path=tmp_path / "llm.log")
    with server:
        assert server.url is not None
        props = httpx.get(f"{server.url}/props", timeout=10, trust_env=False).json()
        prompt = httpx.post(f"{server.url}/apply-template", json=HELLO, timeout=10, trust_env=False).json()["prompt"]
    return server.command(), props, prompt


def test_a_model_that_is_not_a_metnos_size_is_served_with_its_gguf_template(tmp_path: Path) -> None:
    argv, props, prompt = served(write_tiny_llama(tmp_path / "tiny-other.gguf", chat_template=OWN), tmp_path)
    assert argv[argv.index("--template") + 1] == BUILTIN_TEMPLATE
    assert props["chat_template"] == OWN
    assert prompt == "[tiny:user] hello there\n"


def test_a_metnos_size_keeps_metnos_template_over_the_one_its_gguf_carries(tmp_path: Path) -> None:
    argv, props, prompt = served(write_tiny_llama(tmp_path / MODELS["0.5b"].filename, chat_template=OWN), tmp_path)
    assert argv[argv.index("--template") + 1] == str(chat_template_path())
    # llama.cpp drops the file's last newline; the template is otherwise the file, byte for byte.
    assert props["chat_template"] == chat_template_path().read_text(encoding="utf-8").rstrip("\n")
    assert "<|im_start|>user\nhello there<|im_end|>" in prompt and "[tiny:" not in prompt


TOOLS = [{"type": "function", "function": {"name": name, "description": f"What {name} does.", "parameters": {
    "type": "object", "required": ["paths"],
    "properties": {"paths": {"type": "array", "items": {"type": "string"}}, "mode": {"type": "string", "enum": ["a", "b"]}}}}}
    for name in ("find_files", "read_files")]
TURN = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "read ~/a.md"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "read_files", "arguments": '{"paths": ["~/a.md"]}'}}]},
        {"role": "tool", "tool_call_id": "1", "content": "hello"}]
# What the model must read: one tool a line, each turn closed by <|im_end|> and a newline, a role alone on its line.
SERVED_TURN = """<|im_start|>system
Rules.

# Tools ("?": optional; [x]: list of x)
find_files(paths: [string], mode?: a|b): What find_files does.
read_files(paths: [string], mode?: a|b): What read_files does.

To call a tool, reply with only this block:
```json
{"name": "<tool name>", "arguments": {<arguments as a JSON object>}}
```<|im_end|>
<|im_start|>user
read ~/a.md<|im_end|>
<|im_start|>assistant
```json
{"name": "read_files", "arguments": {"paths": ["~/a.md"]}}
```<|im_end|>
<|im_start|>user
Step 1 returned:
hello

My request: read ~/a.md
If it needs one more step, call the tool for that step (a list made by step N is passed with "from_step": N). If it is done, answer me in plain text with the actual values.<|im_end|>
<|im_start|>assistant
"""


def test_the_served_prompt_puts_each_tool_and_each_turn_on_its_own_lines(tmp_path: Path) -> None:
    """llama.cpp renders with trim_blocks and lstrip_blocks: a template written for plain Jinja glued
    every tool onto one line (a description read as the next tool's) and "user" onto the text after it."""
    server = EmbeddedServer(write_tiny_llama(tmp_path / MODELS["0.5b"].filename, chat_template=OWN), n_ctx=256, threads=1,
                            log_path=tmp_path / "llm.log")
    with server:
        body = {"messages": TURN, "tools": TOOLS}
        prompt = httpx.post(f"{server.url}/apply-template", json=body, timeout=10, trust_env=False).json()["prompt"]
        words_only = httpx.post(f"{server.url}/apply-template", json={"messages": TURN}, timeout=10, trust_env=False).json()["prompt"]
    assert prompt == SERVED_TURN
    assert words_only.startswith("<|im_start|>system\nYou are a helpful assistant. Answer the user's request from the tool results, "
                                 "in plain text.<|im_end|>\n<|im_start|>user\nread ~/a.md<|im_end|>\n")
    assert words_only.endswith("<|im_start|>user\nThe tool returned:\nhello\n\nUsing this result, answer my request in plain text with "
                               "the actual values from it (no JSON, no tool call).<|im_end|>\n<|im_start|>assistant\n")
