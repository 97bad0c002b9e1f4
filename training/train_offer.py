"""Learn the offer model (metnos/runtime/step/learned_offer.py) from the written requests of training/offer/.

Each file of training/offer/ was written by a writer shown only the catalogue's names, summaries and
descriptions, for a persona of its own, six wordings a task (plain, another verb, a typo, casual, two in
Italian), each task labelled with the executors it needs. None of them is a measured set: a request
that is word for word in bench/shortlist_requests*.jsonl is left out of the training, so that the bench
measures the model only on requests it never saw.

The model: the runtime's own hashed n-gram features (``learned_offer.features``), a one-vs-rest logistic
regression (scikit-learn, a tool of this script only: the runtime scores the saved weights itself), with
one more output, ``CHANGES``, learned from whether a request needs any executor with side effects, and a
last, ``NOTHING``, learned from the messages that need no executor at all (training/offer/chat_*.jsonl), which
teach nothing else. The
thresholds are chosen on the training requests alone, by cross-validation grouped by task (the six
wordings of a task stay on one side): the highest ``CHANGES`` threshold that still passes
``--change-keep`` of the requests that change something, then a threshold for each executor with side
effects, held to its product with the change reading (``learned_offer.side_score``), such that side
effects offered to read-only requests stay within ``--side-limit``, and the lowest read-only threshold
whose mean offer stays within ``--pool-limit``; ``NOTHING``'s, the lowest that reads at most
``--nothing-limit`` of the requests that need an executor as needing none. Weights under ``--prune`` are dropped, and the rest kept as float16.

Run: PYTHONPATH=$PWD python3 training/train_offer.py      (``pip install "scikit-learn>=1.4,<2"`` first)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.shortlist_recall import BLIND_SETS, REQUEST_SET, Written, catalogue, written_figures  # noqa: E402
from metnos.runtime.step.learned_offer import (  # noqa: E402
    BUCKETS, CHANGES, MODEL_FILE, NOTHING, OfferModel, SparseWeights, features, held_score, load,
)

TRAINING = REPO / "training" / "offer"


def read_rows(path: Path) -> list[Written]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            o = json.loads(line)
            rows.append(Written(o["task"], o["split"], o["lang"], o["form"], o["text"], frozenset(o["needs"]), bool(o["read_only"])))
    return rows


JOINS = {"en": (", then ", " and ", ". ", "; ", " - "), "it": (", poi ", " e ", ". ", " e poi ", "; ")}


def compounds(rows: list[Written], share: float, seed: int = 30) -> list[Written]:
    """Requests of two asks in one message, as people type them ("what's on friday? put it in ~/plan.txt"),
    to measure the change reading on: each joins two requests of different tasks in one language, and needs
    what both need. Half join two requests that only read, and stay read-only; half join one that only
    reads with one that changes something, in either order, and change something. (Trained on, they taught
    the reading that two asks change something: docs/benchmarks.md.)"""
    import random

    rng = random.Random(seed)
    reading = {lang: [r for r in rows if r.lang == lang and r.read_only] for lang in {r.lang for r in rows}}
    changing = {lang: [r for r in rows if r.lang == lang and not r.read_only] for lang in reading}
    out = []
    for first in rng.sample([r for r in rows if r.read_only], int(share * len(rows))):
        other = rng.choice(reading[first.lang] if rng.random() < 0.5 else changing[first.lang] or reading[first.lang])
        if other.task == first.task:
            continue
        a, b = (first, other) if rng.random() < 0.5 else (other, first)
        head = a.text.rstrip()
        text = (f"{head} {b.text}" if head.endswith(("?", ".", "!"))
                else f"{head}{rng.choice(JOINS.get(a.lang, JOINS['en']))}{b.text[:1].lower()}{b.text[1:]}")
        out.append(Written(f"{a.task}+{b.task}", a.split, a.lang, "compound", text, a.needs | b.needs,
                           a.read_only and b.read_only))
    return out


def matrix(texts: list[str]):  # noqa: ANN201 - a scipy matrix
    from scipy.sparse import csr_matrix

    data, indices, indptr = [], [], [0]
    for text in texts:
        for bucket, value in sorted(features(text).items()):
            indices.append(bucket)
            data.append(value)
        indptr.append(len(indices))
    return csr_matrix((data, indices, indptr), shape=(len(texts), BUCKETS))


def fit(rows: list[Written], names: list[str], c: float, balanced: bool = True) -> tuple[list[float], list[list[float]], list[int]]:
    """Intercepts and weights (one row of BUCKETS a trained executor), and which executors were trained."""
    from sklearn.linear_model import LogisticRegression

    x = matrix([r.text for r in rows])
    # A message that needs no executor ("good morning") teaches NOTHING alone: as a no for every executor and
    # for CHANGES, "thanks for sending that earlier" taught send_messages that "send" is no sign of a send, and
    # 0.15 points of the needed executors of the blind sets went unoffered.
    asks = [i for i, r in enumerate(rows) if r.needs]
    trained, intercepts, coefs = [], [], []
    for k, name in enumerate(names):
        if name == NOTHING:
            xs, y = x, [int(not r.needs) for r in rows]
        else:
            xs = x if len(asks) == len(rows) else x[asks]
            y = [int(not rows[i].read_only) if name == CHANGES else int(name in rows[i].needs) for i in asks]
        if not any(y):
            continue
        model = LogisticRegression(C=c, max_iter=3000, class_weight="balanced" if balanced else None).fit(xs, y)
        trained.append(k)
        intercepts.append(float(model.intercept_[0]))
        coefs.append(model.coef_[0])
    return intercepts, coefs, trained


def as_model(names: list[str], intercepts: list[float], coefs: list, trained: list[int], prune: float,
             read_t: float = 0.5, side_t: float = 0.5, change_t: float = 0.0,
             own: dict[str, float] | None = None, nothing_t: float = 0.0) -> OfferModel:
    weights: dict[int, list[tuple[int, float]]] = {}
    for j, coef in enumerate(coefs):
        for bucket in coef.nonzero()[0]:
            w = float(coef[bucket])
            if abs(w) >= prune:
                weights.setdefault(int(bucket), []).append((j, w))
    return OfferModel(tuple(names[k] for k in trained), tuple(intercepts), SparseWeights.of(weights),
                      read_t, side_t, change_t, dict(own or {}), nothing_t)


def choose_thresholds(rows: list[Written], names: list[str], side_effecting: frozenset[str], answers: frozenset[str],
                      args: argparse.Namespace, folds: int = 5) -> tuple[float, float, dict[str, float], float, dict]:
    from sklearn.model_selection import GroupKFold

    probs: list[dict[str, float]] = [{} for _ in rows]
    two_asks: list[tuple[Written, float]] = []
    for train, test in GroupKFold(n_splits=folds).split(rows, groups=[r.task for r in rows]):
        model = as_model(names, *fit([rows[i] for i in train], names, args.c, args.balanced), prune=args.prune)
        for i in test:
            probs[i] = model.probabilities(rows[i].text)
        two_asks += [(r, model.probabilities(r.text)[CHANGES]) for r in compounds([rows[i] for i in test], 0.3, seed=31)]
    # Steps of 0.01: with steps of 0.02 the read-only threshold stopped at 0.04, a mean offer of 3.5
    # executors against a budget of 4.0, and 0.03 fits it.
    grid = [x / 100 for x in range(1, 96)]
    read_only = [i for i, r in enumerate(rows) if r.read_only]
    changing = [i for i, r in enumerate(rows) if not r.read_only]
    change_t = max(t for t in [0.0, *grid] if sum(probs[i][CHANGES] >= t for i in changing) / len(changing) >= args.change_keep)

    changing_pairs = [p for r, p in two_asks if not r.read_only]
    reading_pairs = [p for r, p in two_asks if r.read_only]
    print(f"two-ask requests of the held-out folds: {sum(p >= change_t for p in changing_pairs) / len(changing_pairs):.1%} "
          f"of {len(changing_pairs)} that change something read so, {sum(p >= change_t for p in reading_pairs) / len(reading_pairs):.1%} "
          f"of {len(reading_pairs)} that only read")

    def score(p: dict[str, float], n: str) -> float:
        """As the runtime reads it (``learned_offer.held_score``), -1.0 where it may not be offered."""
        held = held_score(n, p[n], p[CHANGES], p[CHANGES] >= change_t, side_effecting, answers)
        return -1.0 if held is None else held

    def pool(p: dict[str, float], read_t: float, side_t: float) -> set[str]:
        return {n for n in p if n != CHANGES and score(p, n) >= (side_t if n in side_effecting else read_t)}

    side_t = next(t for t in grid if sum(bool(pool(probs[i], 1.1, t)) for i in read_only) / len(read_only) <= args.side_limit)
    read_t = next(t for t in grid if sum(len(pool(p, t, side_t)) for p in probs) / len(rows) <= args.pool_limit)
    scores = [{n: score(p, n) for n in p if n in side_effecting} for p in probs]
    own = own_side_thresholds(rows, probs, scores, side_effecting, read_t, args.side_limit, [x / 100 for x in range(1, 96)])

    def offer(p: dict[str, float], scored: dict[str, float]) -> list[str]:
        return sorted({n for n, v in p.items() if n != CHANGES and n not in side_effecting and v >= read_t}
                      | {n for n, t in own.items() if scored.get(n, -1.0) >= t})

    flat = written_figures(rows, {r.text: sorted(pool(p, read_t, side_t)) for r, p in zip(rows, probs, strict=True)},
                           side_effecting)
    print(f"with one side-effect threshold ({side_t:.2f}) instead: recall {flat['recall']:.1%} "
          f"({flat['recall_per_executor']:.1%}), side effects offered {flat['side_effects_offered']:.1%}")
    pools = {r.text: offer(p, scored) for r, p, scored in zip(rows, probs, scores, strict=True)}
    return read_t, side_t, own, change_t, written_figures(rows, pools, side_effecting)


def nothing_threshold(rows: list[Written], args: argparse.Namespace, folds: int = 5) -> tuple[float, dict]:
    """The lowest threshold at which NOTHING, read on the held-out folds, takes at most ``--nothing-limit`` of
    the requests that need an executor for messages that need none, and what it does there."""
    from sklearn.model_selection import GroupKFold

    held = [0.0] * len(rows)
    for train, test in GroupKFold(n_splits=folds).split(rows, groups=[r.task for r in rows]):
        model = as_model([NOTHING], *fit([rows[i] for i in train], [NOTHING], args.c, args.balanced), prune=args.prune)
        for i in test:
            held[i] = model.probabilities(rows[i].text)[NOTHING]
    asks = [p for p, r in zip(held, rows, strict=True) if r.needs]
    chat = [p for p, r in zip(held, rows, strict=True) if not r.needs]
    t = next(x / 100 for x in range(1, 100) if sum(p >= x / 100 for p in asks) / len(asks) <= args.nothing_limit)
    return t, {"asks_read_as_nothing": sum(p >= t for p in asks) / len(asks), "chat_read_as_nothing": sum(p >= t for p in chat) / len(chat)}


def own_side_thresholds(rows: list[Written], probs: list[dict[str, float]], scores: list[dict[str, float]],
                        side_effecting: frozenset[str], read_t: float, limit: float, grid: list[float]) -> dict[str, float]:
    """A threshold for each executor with side effects: all start above every grid value, and each round
    lowers the one whose cut completes the most requests for each read-only request it newly offers a side
    effect, while the share of those stays within ``limit`` (a budgeted greedy: some executors' probabilities
    run lower than others' for the requests that need them)."""
    read_only = {i for i, r in enumerate(rows) if r.read_only}
    budget = int(limit * len(read_only))
    offered = [{n for n, v in p.items() if n != CHANGES and n not in side_effecting and v >= read_t} for p in probs]
    # Per executor, the requests it may be offered to (``scores``: the change reading passed), highest score first.
    ranked = {n: sorted(((p[n], i) for i, p in enumerate(scores) if p.get(n, -1.0) >= 0.0), reverse=True)
              for n in side_effecting if any(n in p for p in scores)}
    own = dict.fromkeys(ranked, 1.0)
    spent = 0
    while True:
        best = None
        for name, now in own.items():
            band, gain, newly = [], 0, set()
            queue = [(v, i) for v, i in ranked[name] if v < now]
            k = 0
            for t in (g for g in reversed(grid) if g < now):
                while k < len(queue) and queue[k][0] >= t:
                    i = queue[k][1]
                    band.append(i)
                    if i in read_only and not offered[i] & side_effecting:
                        newly.add(i)
                    if name in rows[i].needs and rows[i].needs <= offered[i] | {name}:
                        gain += 1
                    k += 1
                cost = len(newly)
                if gain and spent + cost <= budget and (best is None or gain / (cost + 1) > best[0]):
                    best = (gain / (cost + 1), name, t, list(band), cost)
        if best is None:
            return own
        _, name, t, band, cost = best
        own[name], spent = t, spent + cost
        for i in band:
            offered[i].add(name)


def save(model: OfferModel, path: Path) -> None:
    import numpy as np

    rows, cols, values = [], [], []
    for bucket, k, w in model.weights.triples():
        rows.append(bucket)
        cols.append(k)
        values.append(w)
    np.savez_compressed(path, names=np.array(model.names), intercepts=np.array(model.intercepts, dtype=np.float32),
                        rows=np.array(rows, dtype=np.int32), cols=np.array(cols, dtype=np.int16),
                        values=np.array(values, dtype=np.float16), read_threshold=np.float32(model.read_threshold),
                        side_threshold=np.float32(model.side_threshold), change_threshold=np.float32(model.change_threshold),
                        side_thresholds=np.array([model.side_thresholds.get(n, 0.0) for n in model.names], dtype=np.float32),
                        nothing_threshold=np.float32(model.nothing_threshold))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--change-keep", type=float, default=0.985,
                        help="the share of requests that change something whose CHANGES output must pass its threshold")
    parser.add_argument("--side-limit", type=float, default=0.03)
    parser.add_argument("--pool-limit", type=float, default=4.0)
    parser.add_argument("--c", type=float, default=10.0, help="the inverse strength of the regularisation")
    parser.add_argument("--nothing-limit", type=float, default=0.001,
                        help="the share of requests that need an executor that may read as needing none")
    parser.add_argument("--prune", type=float, default=0.05, help="weights smaller than this are dropped")
    parser.add_argument("--out", type=Path, default=MODEL_FILE)
    parser.add_argument("--unbalanced", dest="balanced", action="store_false",
                        help="weigh each request alike, not each executor's yes and no alike")
    args = parser.parse_args(argv)

    entries = catalogue()
    names = [e.name for e in entries] + [CHANGES]
    side_effecting = frozenset(e.name for e in entries if e.side_effects)
    answers = frozenset(e.name for e in entries if e.side_effects and e.output_varies is not None)
    measured = {r.text.casefold() for path in (REQUEST_SET, *BLIND_SETS) for r in read_rows(path)}
    rows = [r for path in sorted(TRAINING.glob("*.jsonl")) for r in read_rows(path)]
    left_out = [r.text for r in rows if r.text.casefold() in measured]
    rows = [r for r in rows if r.text.casefold() not in measured]
    print(f"{len(rows)} training requests, {len({r.task for r in rows})} tasks; {len(left_out)} left out, being word for "
          f"word in a measured set")
    asking = [r for r in rows if r.needs]
    read_t, side_t, own, change_t, cv = choose_thresholds(asking, names, side_effecting, answers, args)
    nothing_t, nothing = nothing_threshold(rows, args)
    print(f"needs nothing at {nothing_t:.2f}: {nothing['chat_read_as_nothing']:.1%} of {len(rows) - len(asking)} messages "
          f"that need no executor read so, {nothing['asks_read_as_nothing']:.2%} of {len(asking)} that need one")
    print(f"thresholds by grouped cross-validation: read-only {read_t:.2f}, side effects "
          f"{', '.join(f'{n} {t:.2f}' for n, t in sorted(own.items()))}, "
          f"asks for a change {change_t:.2f}; there, recall "
          f"{cv['recall']:.1%} ({cv['recall_per_executor']:.1%}), side effects offered {cv['side_effects_offered']:.1%}, "
          f"mean pool {cv['mean_pool']:.1f}")
    model = as_model([*names, NOTHING], *fit(rows, [*names, NOTHING], args.c, args.balanced), prune=args.prune, read_t=read_t,
                     side_t=side_t, change_t=change_t, own=own, nothing_t=nothing_t)
    save(model, args.out)
    again = load(args.out)
    moved = sum(again.offered(r.text, side_effecting, answers) != model.offered(r.text, side_effecting, answers) for r in rows)
    print(f"saved {args.out}: {args.out.stat().st_size} bytes, {len(model.weights)} "
          f"weights over {model.weights.buckets()} buckets; {moved} training offers changed by float16")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
