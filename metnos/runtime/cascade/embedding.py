"""Sentence vectors for the cascade's cosine search, from a model shipped inside a PyPI wheel.

WordLlama's wheel carries its 256-dimension static model (token embeddings
and tokenizer), so it loads from the installed package with no network; the
library's own loader looks for the tokenizer in another folder and would go
to the network, so the two files are opened here directly. Where that
package is missing the cascade says so and falls back to hashed character
n-grams, which catch rewordings that keep most of their words.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import numpy as np
from threadpoolctl import ThreadpoolController


class Embedder(Protocol):
    name: str
    # A prefix of this many dimensions is itself a usable vector (Matryoshka
    # training); None when the vector has no such prefix.
    prefix_dims: int | None

    def embed(self, texts: list[str]) -> np.ndarray: ...


@contextmanager
def _root_logging_kept() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


class WordLlamaEmbedder:
    name = "wordllama-l2-supercat-256"
    prefix_dims = 32

    def __init__(self) -> None:
        # Heavy (numpy, safetensors, the tokenizer): loaded when the cascade first embeds, not at start.
        from safetensors import safe_open
        from tokenizers import Tokenizer

        with _root_logging_kept():
            # wordllama calls logging.basicConfig(level=INFO) when imported: left alone,
            # every httpx request of the turn would print an INFO line on the user's terminal.
            import wordllama
            from wordllama.inference import WordLlamaInference

        root = Path(wordllama.__file__).parent
        tokenizer = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
        with safe_open(str(root / "weights" / "l2_supercat_256.safetensors"), framework="np", device="cpu") as f:
            table = f.get_tensor("embedding.weight")
        self._model = WordLlamaInference(table, tokenizer, binary=False)

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.embed(texts, norm=True), dtype=np.float32)


class HashedNgramEmbedder:
    """Character 3- to 5-grams of each word, hashed into 512 buckets, normalised."""

    name = "hashed-char-ngrams-512"
    dims = 512
    prefix_dims = None

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.casefold()):
                padded = f"<{word}>"
                for n in (3, 4, 5):
                    for i in range(max(1, len(padded) - n + 1)):
                        digest = hashlib.blake2b(padded[i:i + n].encode(), digest_size=4).digest()
                        out[row, int.from_bytes(digest, "little") % self.dims] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def load_embedder(prefer: str = "wordllama") -> Embedder:
    if prefer == "wordllama":
        try:
            return WordLlamaEmbedder()
        except (ImportError, OSError):
            pass
    return HashedNgramEmbedder()


class VectorIndex:
    """Unit vectors in one matrix: the nearest entry is one matrix-vector product.

    Past ``COARSE_FROM`` entries, for an embedder whose vector prefix is
    itself a vector (WordLlama is trained so), the product is first taken on
    the leading ``prefix_dims`` dimensions and only the best ``COARSE_KEEP``
    are scored on all of them: at 100,000 entries that keeps a lookup within
    a few milliseconds (bench/cascade.py)."""

    COARSE_FROM = 20_000
    COARSE_KEEP = 64

    def __init__(self, ids: list[str], vectors: np.ndarray, prefix_dims: int | None = None) -> None:
        self.ids = ids
        self.matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        self.coarse: np.ndarray | None = None
        self.prefix_dims = prefix_dims
        if prefix_dims and len(ids) >= self.COARSE_FROM and self.matrix.shape[1] > prefix_dims:
            prefix = self.matrix[:, :prefix_dims]
            norms = np.linalg.norm(prefix, axis=1, keepdims=True)
            self.coarse = np.ascontiguousarray(prefix / np.where(norms == 0, 1, norms))

    def __len__(self) -> int:
        return len(self.ids)

    def nearest(self, vector: np.ndarray, k: int = 3) -> list[tuple[str, float]]:
        if not self.ids:
            return []
        # A matrix-vector product is bound by memory, not arithmetic: BLAS
        # threads only spin against each other, and on a loaded machine they
        # made a 10,000-entry lookup 10x slower (bench/cascade.py).
        with _blas().limit(limits=1, user_api="blas"):
            return self._nearest(vector, k)

    def _nearest(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        query = vector.astype(np.float32).ravel()
        if self.coarse is not None:
            head = query[: self.prefix_dims]
            rough = self.coarse @ (head / (np.linalg.norm(head) or 1.0))
            pool = np.argpartition(-rough, self.COARSE_KEEP - 1)[: self.COARSE_KEEP]
            scores = self.matrix[pool] @ query
            order = np.argsort(-scores)[:k]
            return [(self.ids[pool[i]], float(scores[i])) for i in order]
        scores = self.matrix @ query
        k = min(k, len(self.ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(self.ids[i], float(scores[i])) for i in top]


_controller: ThreadpoolController | None = None


def _blas() -> ThreadpoolController:
    """The process's thread pools, inspected once (inspecting them costs ten times a lookup)."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller
