"""Which chat template the embedded server gets: Metnos's own for its known sizes, the GGUF's own
for any other model that carries one (llama.cpp's --jinja renders it), Metnos's ChatML for one that
carries none.

The GGUFs are written in the test (tests/support/gguf_files.py: a header, a vocabulary, maybe a
template, no tensors); they cannot be loaded by llama.cpp, and the real model is not started here,
so what is checked is the server's argv (``--template``) and what the shared server records.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from metnos.mechanisms.llm import shared_server
from metnos.mechanisms.llm.embedded import BUILTIN_TEMPLATE, EmbeddedServer, chat_template_for, chat_template_path
from metnos.mechanisms.llm.gguf_file import NotGGUF, chat_template_of, is_gguf
from metnos.mechanisms.llm.model_files import MODELS
from tests.support.gguf_files import gguf_bytes, write_gguf

TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"


def template_arg(path: Path) -> str:
    argv = EmbeddedServer(path).command()
    return argv[argv.index("--template") + 1]


def test_the_template_is_read_from_the_metadata_past_the_vocabulary(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", chat_template=TEMPLATE, padding=4096)
    assert is_gguf(path) and chat_template_of(path) == TEMPLATE
    assert chat_template_of(write_gguf(tmp_path / "none.gguf")) is None


def test_a_file_that_is_not_gguf_or_is_cut_short_is_named(tmp_path: Path) -> None:
    html = tmp_path / "page.gguf"
    html.write_bytes(b"<html>")
    assert not is_gguf(html)
    with pytest.raises(NotGGUF, match="not a GGUF file"):
        chat_template_of(html)
    whole = gguf_bytes({"tokenizer.ggml.tokens": ["a"] * 50, "tokenizer.chat_template": TEMPLATE})
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[:120])
    with pytest.raises(NotGGUF, match="cut short"):
        chat_template_of(cut)
    cut.write_bytes(whole[:-5])  # the template itself cut: not read as a shorter template
    with pytest.raises(NotGGUF, match="cut short"):
        chat_template_of(cut)


def test_a_model_that_is_not_one_of_metnos_sizes_is_served_with_its_own_template(tmp_path: Path) -> None:
    own = write_gguf(tmp_path / "other-3b.Q4_K_M.gguf", chat_template=TEMPLATE)
    assert chat_template_for(own) == BUILTIN_TEMPLATE
    assert template_arg(own) == BUILTIN_TEMPLATE


def test_a_known_size_keeps_metnos_template_even_if_its_gguf_carries_one(tmp_path: Path) -> None:
    for spec in MODELS.values():
        known = write_gguf(tmp_path / spec.filename, chat_template=TEMPLATE)
        assert template_arg(known) == str(chat_template_path())


def test_a_gguf_without_a_template_gets_metnos_chatml(tmp_path: Path) -> None:
    bare = write_gguf(tmp_path / "bare.gguf")
    assert template_arg(bare) == str(chat_template_path())
    blank = write_gguf(tmp_path / "blank.gguf", chat_template="  ")
    assert template_arg(blank) == str(chat_template_path())


def test_a_shared_server_is_reused_only_with_the_template_it_was_started_with(tmp_path: Path) -> None:
    own = write_gguf(tmp_path / "other.gguf", chat_template=TEMPLATE)
    known = write_gguf(tmp_path / MODELS["0.5b"].filename, chat_template=TEMPLATE)
    assert shared_server.template_fingerprint(known) == shared_server.template_fingerprint()
    assert shared_server.template_fingerprint(own) != shared_server.template_fingerprint()
    # What announce records for a model served with its own template is what find_running expects of it.
    shared_server.announce(tmp_path / "rt", url="http://127.0.0.1:1", pid=1, model=own, owner="test")
    recorded = shared_server.state_path(tmp_path / "rt").read_text()
    assert shared_server.template_fingerprint(own) in recorded


def test_reading_the_template_of_a_real_sized_vocabulary_is_quick(tmp_path: Path) -> None:
    # A vocabulary as large as Qwen2.5's (151,936 tokens) ahead of the template: read at each server start.
    path = tmp_path / "big-vocab.gguf"
    path.write_bytes(gguf_bytes({"tokenizer.ggml.tokens": [f"t{i}" for i in range(151_936)],
                                 "tokenizer.ggml.merges": [f"a b{i}" for i in range(151_387)],
                                 "tokenizer.chat_template": TEMPLATE}))
    t0 = time.perf_counter()
    assert chat_template_of(path) == TEMPLATE
    assert time.perf_counter() - t0 < 2.0
