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
