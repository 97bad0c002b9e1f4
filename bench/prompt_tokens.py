"""Count the tokens of a first prompt without starting the model.

The embedded model's server renders a prompt with Metnos's chat template
(metnos/mechanisms/llm/chat_template.jinja) and counts it with the GGUF's own tokenizer;
bench/first_prompt.py asks a running server to do both. This does the same
offline: the template is rendered with Jinja2 (llama.cpp renders it with its
own Jinja engine, which agrees on this template's constructs) and the text is
tokenised with a byte-level BPE built from the GGUF's vocabulary and merges
(the Qwen2 pre-tokeniser), with the `tokenizers` library. Used by
bench/shortlist_recall.py to size the tools block.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.gguf_meta import gguf_metadata

# The pre-tokeniser llama.cpp uses for tokenizer.ggml.pre = "qwen2".
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_CONTROL = 3  # tokenizer.ggml.token_type of a special token


class GGUFTokenizer:
    def __init__(self, model_path: Path) -> None:
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

        meta = gguf_metadata(model_path, skip_prefix="\0")
        if meta.get("tokenizer.ggml.pre") != "qwen2" or meta.get("tokenizer.ggml.model") != "gpt2":
            raise ValueError(f"{model_path}: only the Qwen2 byte-level BPE tokenizer is rebuilt here, "
                             f"not {meta.get('tokenizer.ggml.model')}/{meta.get('tokenizer.ggml.pre')}")
        tokens: list[str] = meta["tokenizer.ggml.tokens"]
        kinds: list[int] = meta["tokenizer.ggml.token_type"]
        merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
        bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, ignore_merges=False)
        self._tokenizer = Tokenizer(bpe)
        self._tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        self._tokenizer.decoder = decoders.ByteLevel()
        self._tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                            for t, k in zip(tokens, kinds) if k == _CONTROL])
        self.chat_template: str = meta.get("tokenizer.chat_template", "")

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


def render(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The prompt text the template makes, as the server's /apply-template would."""
    import jinja2

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    return env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=True)
