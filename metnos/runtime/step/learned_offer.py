"""The executors a request needs, as read by a classifier learned from written requests (issue 30 item 6).

The shortlist's rules read the request's words: its verbs, their negations, the
targets it names. On requests written by people who never saw the rules, they
offer every needed executor for about 6 requests in 10. A linear classifier over
the request's character and word n-grams, learned from requests written apart
from every measured set (training/offer/, trained by training/train_offer.py),
reads wordings the rules do not: idioms, notes without a verb, typos and
Italian clitics.

Each executor it was trained on gets a probability; it is offered when the
probability reaches the model's threshold, a higher one for an executor with
side effects. One more output, :data:`CHANGES`, is learned from whether a
request needs any executor with side effects at all: pooled over every kind of
change, it tells a request that changes something from one that only reads far
better than any one executor's output, and below its threshold no executor
with side effects is offered (:attr:`LearnedReading.changes`). The model is a file in the package (``offer_model.npz``): hashed
n-gram features (a stable CRC32, so the same text gives the same features in
every process) and a sparse weight matrix; it is read once, with numpy, and
scored in pure Python on the few hundred features of one request.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from blake3 import blake3

MODEL_FILE = Path(__file__).with_name("offer_model.npz")
# The output that reads whether the request asks for a change at all: not an executor's name.
CHANGES = "‹changes›"
BUCKETS = 1 << 18
CHAR_SIZES = (2, 3, 4, 5)
_WORD = re.compile(r"\w+")


# A path or an address stands for its kind and a file's extension: its folder and file names are the
# user's own, and a classifier that learned them would offer by the name of a file.
_PLACE = re.compile(r"(?<![\w~./:])(?:https?://|~/|/|\.{1,2}/)\S*")
_EXTENSION = re.compile(r"\.([a-z0-9]{1,5})[^\w]*$")


def _kind(place: re.Match[str]) -> str:
    if place.group().startswith(("http://", "https://")):
        return " ‹address› "
    extension = _EXTENSION.search(place.group().casefold())
    return f" ‹file› {extension.group(1)} " if extension else " ‹folder› "


def features(text: str) -> dict[int, float]:
    """The request's n-grams, hashed: characters within each word (padded by a space at each end, two to
    five long) and words and word pairs, each path or address replaced by its kind; sublinear counts,
    scaled to unit length."""
    folded = _PLACE.sub(_kind, text).casefold()
    grams: Counter[str] = Counter()
    for word in folded.split():
        padded = f" {word} "
        for n in CHAR_SIZES:
            grams.update("c" + padded[i:i + n] for i in range(len(padded) - n + 1))
    words = _WORD.findall(folded)
    grams.update("w " + w for w in words)
    grams.update(f"p {a} {b}" for a, b in zip(words, words[1:]))
    counted: Counter[int] = Counter()
    for gram, count in grams.items():
        counted[zlib.crc32(gram.encode()) % BUCKETS] += 1.0 + math.log(count)
    norm = math.sqrt(sum(v * v for v in counted.values())) or 1.0
    return {bucket: value / norm for bucket, value in counted.items()}


@dataclass(frozen=True)
class LearnedReading:
    """What the model reads in a request: the executors it offers, most likely first, and whether the request
    asks for a change at all (False: no executor with side effects is to be offered)."""

    tools: tuple[str, ...]
    changes: bool


@dataclass(frozen=True)
class OfferModel:
    """A one-vs-rest logistic regression: per executor (and :data:`CHANGES`) an intercept, per feature bucket
    its weights."""

    names: tuple[str, ...]
    intercepts: tuple[float, ...]
    # bucket -> ((executor index, weight), ...)
    weights: Mapping[int, tuple[tuple[int, float], ...]]
    read_threshold: float
    side_threshold: float
    # Below it, :data:`CHANGES` says the request changes nothing; 0.0 for a model without that output.
    change_threshold: float = 0.0
    # The saved file's digest: a ranking records it, so a replay after a retrain can name why its offer moved.
    digest: str = ""

    def probabilities(self, text: str) -> dict[str, float]:
        scores = list(self.intercepts)
        for bucket, value in features(text).items():
            for k, w in self.weights.get(bucket, ()):
                scores[k] += value * w
        return {name: 1.0 / (1.0 + math.exp(-s)) for name, s in zip(self.names, scores, strict=True)}

    def read(self, text: str, side_effecting: frozenset[str] | set[str]) -> LearnedReading:
        """The executors whose probability reaches their threshold, most likely first (those with side effects
        only when the request reads as asking for a change)."""
        probs = self.probabilities(text)
        changes = probs.pop(CHANGES, 1.0) >= self.change_threshold
        kept = [n for n, p in probs.items()
                if ((p >= self.side_threshold and changes) if n in side_effecting else p >= self.read_threshold)]
        return LearnedReading(tuple(sorted(kept, key=lambda n: (-probs[n], n))), changes)

    def offered(self, text: str, side_effecting: frozenset[str] | set[str]) -> tuple[str, ...]:
        return self.read(text, side_effecting).tools


def load(path: Path = MODEL_FILE) -> OfferModel:
    import numpy as np  # numpy costs a CLI that makes no turn 0.1 s at start
    digest = blake3(path.read_bytes()).hexdigest()[:16]

    with np.load(path, allow_pickle=False) as z:
        names = tuple(str(n) for n in z["names"])
        rows, cols, values = z["rows"].tolist(), z["cols"].tolist(), z["values"].astype("float64").tolist()
        weights: dict[int, list[tuple[int, float]]] = {}
        for bucket, k, w in zip(rows, cols, values, strict=True):
            weights.setdefault(bucket, []).append((k, w))
        return OfferModel(names, tuple(z["intercepts"].astype("float64").tolist()),
                          {b: tuple(ws) for b, ws in weights.items()},
                          float(z["read_threshold"]), float(z["side_threshold"]),
                          float(z["change_threshold"]) if "change_threshold" in z else 0.0, digest)


@lru_cache(maxsize=1)
def shipped() -> OfferModel | None:
    """The model in the package, read once; None when the package holds none."""
    return load() if MODEL_FILE.exists() else None
