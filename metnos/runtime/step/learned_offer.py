"""The executors a request needs, as read by a classifier learned from written requests (issue 30 item 6).

The shortlist's rules read the request's words: its verbs, their negations, the
targets it names. On requests written by people who never saw the rules, they
offer every needed executor for about 6 requests in 10. A linear classifier over
the request's character and word n-grams, learned from requests written apart
from every measured set (training/offer/, trained by training/train_offer.py),
reads wordings the rules do not: idioms, notes without a verb, typos and
Italian clitics.

Each executor it was trained on gets a probability; one without side effects
is offered when it reaches the model's threshold, one with side effects when
its product with the probability of a change (:func:`side_score`) reaches the
executor's own. One more output, :data:`CHANGES`, is learned from whether a
request needs any executor with side effects at all: pooled over every kind of
change, it tells a request that changes something from one that only reads far
better than any one executor's output, and below its threshold no executor
with side effects is offered (:attr:`LearnedReading.changes`). A last output, :data:`NOTHING`, is learned
from messages that need no executor at all ("good morning", "thanks, that was it"): at its threshold the
model offers only what it is surer of than of that, most often nothing (a greeting had read as
cancel_recurring at 0.99). The model is a file in the package (``offer_model.npz``): hashed
n-gram features (a stable CRC32, so the same text gives the same features in
every process) and a sparse weight matrix; it is read once, with numpy, and
scored with numpy on the few hundred features of one request.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from blake3 import blake3

if TYPE_CHECKING:
    import numpy as np

MODEL_FILE = Path(__file__).with_name("offer_model.npz")
# The output that reads whether the request asks for a change at all: not an executor's name.
CHANGES = "‹changes›"
# The output that reads whether the message needs any executor at all.
NOTHING = "‹nothing›"
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
    # Every executor the model was trained on, most likely first: the order in which a small model is shown
    # them, whichever rule brought them.
    likeliest: tuple[str, ...] = ()


class SparseWeights:
    """Per feature bucket, the (executor index, weight) pairs of the model, kept as numpy arrays by bucket
    (compressed rows): a saved model is read as three arrays, with no Python object a weight."""

    def __init__(self, buckets: Sequence[int], executors: Sequence[int], values: Sequence[float]) -> None:
        import numpy as np  # numpy costs a CLI that makes no turn 0.1 s at start

        order = np.argsort(np.asarray(buckets, dtype=np.int64), kind="stable")
        buckets_sorted = np.asarray(buckets, dtype=np.int64)[order]
        self.executors = np.asarray(executors, dtype=np.int64)[order]
        self.values = np.asarray(values, dtype=np.float64)[order]
        self.starts = np.concatenate(([0], np.cumsum(np.bincount(buckets_sorted, minlength=BUCKETS))))

    @classmethod
    def of(cls, by_bucket: Mapping[int, Sequence[tuple[int, float]]]) -> SparseWeights:
        triples = [(b, k, w) for b, pairs in sorted(by_bucket.items()) for k, w in pairs]
        return cls([t[0] for t in triples], [t[1] for t in triples], [t[2] for t in triples])

    def triples(self) -> Iterator[tuple[int, int, float]]:
        """(bucket, executor index, weight), by bucket."""
        for bucket in self.starts[1:].nonzero()[0]:
            for i in range(self.starts[bucket], self.starts[bucket + 1]):
                yield int(bucket), int(self.executors[i]), float(self.values[i])

    def as_mapping(self) -> dict[int, tuple[tuple[int, float], ...]]:
        out: dict[int, list[tuple[int, float]]] = {}
        for bucket, k, w in self.triples():
            out.setdefault(bucket, []).append((k, w))
        return {b: tuple(pairs) for b, pairs in out.items()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SparseWeights) and self.as_mapping() == other.as_mapping()

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self.values)

    def buckets(self) -> int:
        return int((self.starts[1:] != self.starts[:-1]).sum())

    def scores(self, weighted: Mapping[int, float], outputs: int) -> np.ndarray:
        """The sum, per output, of each bucket's value times its weights."""
        import numpy as np  # as in __init__: only where a turn scores a request

        buckets = np.fromiter(weighted.keys(), dtype=np.int64, count=len(weighted))
        values = np.fromiter(weighted.values(), dtype=np.float64, count=len(weighted))
        begin, lengths = self.starts[buckets], self.starts[buckets + 1] - self.starts[buckets]
        total = int(lengths.sum())
        if not total:
            return np.zeros(outputs)
        # The positions of every weight of every bucket, in order: each bucket's range laid end to end.
        at = np.repeat(begin - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        return np.bincount(self.executors[at], weights=self.values[at] * np.repeat(values, lengths), minlength=outputs)


@dataclass(frozen=True)
class OfferModel:
    """A one-vs-rest logistic regression: per executor (and :data:`CHANGES`) an intercept, per feature bucket
    its weights."""

    names: tuple[str, ...]
    intercepts: tuple[float, ...]
    weights: SparseWeights
    read_threshold: float
    side_threshold: float
    # Below it, :data:`CHANGES` says the request changes nothing; 0.0 for a model without that output.
    change_threshold: float = 0.0
    # An executor with side effects may have a threshold of its own (in place of ``side_threshold``).
    side_thresholds: Mapping[str, float] = field(default_factory=dict)
    # At or above it, :data:`NOTHING` says the message needs no executor; 0.0 for a model without that output.
    nothing_threshold: float = 0.0
    # The saved file's digest: a ranking records it, so a replay after a retrain can name why its offer moved.
    digest: str = ""

    def probabilities(self, text: str) -> dict[str, float]:
        scores = self.weights.scores(features(text), len(self.names)).tolist()
        return {name: 1.0 / (1.0 + math.exp(-(b + s))) for name, b, s in zip(self.names, self.intercepts, scores, strict=True)}

    def read(self, text: str, side_effecting: frozenset[str] | set[str],
             answers_questions: frozenset[str] | set[str] = frozenset()) -> LearnedReading:
        """The executors that reach their threshold, most likely first: those with side effects by
        :func:`side_score`, and only when the request reads as asking for a change, save those in
        ``answers_questions``, held by their probability alone (a command's output reads the world, and "how
        much space does ~/Music take?" asks for no change)."""
        probs = self.probabilities(text)
        asks_change = probs.pop(CHANGES, 1.0)
        asks_nothing = probs.pop(NOTHING, 0.0)
        changes = asks_change >= self.change_threshold

        def kept(n: str, p: float) -> bool:
            held = held_score(n, p, asks_change, changes, side_effecting, answers_questions)
            threshold = self.side_thresholds.get(n, self.side_threshold) if n in side_effecting else self.read_threshold
            return held is not None and held >= threshold

        likeliest = tuple(sorted(probs, key=lambda n: (-probs[n], n)))
        tools = tuple(n for n in likeliest if kept(n, probs[n]))
        if self.nothing_threshold and asks_nothing >= self.nothing_threshold:
            # Two outputs of one model disagree: an executor stays when the model is surer of it than of the
            # message needing nothing. On the training requests, held out by task, this keeps 30 of the 50
            # needed executors that reading lost, for 0.9 points more of the messages that need nothing
            # offered a side effect (docs/benchmarks.md).
            tools = tuple(n for n in tools if probs[n] > asks_nothing)
            changes = changes and any(n in side_effecting for n in tools)
        return LearnedReading(tools, changes, likeliest)

    def offered(self, text: str, side_effecting: frozenset[str] | set[str],
                answers_questions: frozenset[str] | set[str] = frozenset()) -> tuple[str, ...]:
        return self.read(text, side_effecting, answers_questions).tools


def side_score(needs: float, asks_change: float) -> float:
    """What an executor with side effects is held to its threshold by: the probability that the request asks
    for a change and needs it. An executor's output is often likely for a request that reads ("send me the
    list") or unlikely for one that plainly changes something ("ping Sara"); the product lets a clear
    reading of change carry a weaker one of the executor, and keeps a doubtful one from offering it."""
    return needs * asks_change


def held_score(name: str, needs: float, asks_change: float, changes: bool, side_effecting: frozenset[str] | set[str],
               answers_questions: frozenset[str] | set[str]) -> float | None:
    """What ``name`` is held to its threshold by: its probability, or :func:`side_score` for an executor with
    side effects that does not answer questions; None when it may not be offered (such an executor, for a
    request read as changing nothing)."""
    if name not in side_effecting or name in answers_questions:
        return needs
    return side_score(needs, asks_change) if changes else None


def load(path: Path = MODEL_FILE) -> OfferModel:
    import numpy as np  # numpy costs a CLI that makes no turn 0.1 s at start
    digest = blake3(path.read_bytes()).hexdigest()[:16]

    with np.load(path, allow_pickle=False) as z:
        names = tuple(str(n) for n in z["names"])
        weights = SparseWeights(z["rows"], z["cols"], z["values"].astype("float64"))
        own = z["side_thresholds"].astype("float64").tolist() if "side_thresholds" in z else [0.0] * len(names)
        return OfferModel(names, tuple(z["intercepts"].astype("float64").tolist()), weights,
                          float(z["read_threshold"]), float(z["side_threshold"]),
                          float(z["change_threshold"]) if "change_threshold" in z else 0.0,
                          {n: t for n, t in zip(names, own, strict=True) if t > 0},
                          float(z["nothing_threshold"]) if "nothing_threshold" in z else 0.0, digest)


@lru_cache(maxsize=1)
def shipped() -> OfferModel | None:
    """The model in the package, read once; None when the package holds none."""
    return load() if MODEL_FILE.exists() else None
