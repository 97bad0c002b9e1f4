"""What the offer model's reading of "needs nothing" costs, on the training requests held out by task.

For each fold of a grouped 5-fold split (the six wordings of a task on one side), the model is learned
as training/train_offer.py learns it and given the shipped model's thresholds; each held-out row is read
without the NOTHING output, and then under two rules for a message read as needing nothing (``NOTHING`` at
or above its threshold): the model offers nothing, or only the executors it is surer of than of that (the
rule metnos/runtime/step/learned_offer.py follows). Printed for each: needed executors the rule took from
requests that need one, and the messages that need none still offered anything or a side effect.

Run: PYTHONPATH=$PWD python3 training/nothing_rule.py      (about 6 minutes; scikit-learn, as train_offer.py)
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.shortlist_recall import BLIND_SETS, REQUEST_SET, catalogue  # noqa: E402
from metnos.runtime.step.learned_offer import CHANGES, NOTHING, shipped  # noqa: E402
from training.train_offer import TRAINING, as_model, fit, read_rows  # noqa: E402

# The shipped rule is the model's own (OfferModel.read at the shipped threshold), not written again here.
RULES = ("no reading of NOTHING", "offer nothing", "only what it is surer of")


def main() -> int:
    from sklearn.model_selection import GroupKFold

    shipped_model = shipped()
    entries = catalogue()
    names = [e.name for e in entries] + [CHANGES, NOTHING]
    side = frozenset(e.name for e in entries if e.side_effects)
    answers = frozenset(e.name for e in entries if e.side_effects and e.output_varies is not None)
    measured = {r.text.casefold() for path in (REQUEST_SET, *BLIND_SETS) for r in read_rows(path)}
    rows = [r for path in sorted(TRAINING.glob("*.jsonl")) for r in read_rows(path) if r.text.casefold() not in measured]
    lost = dict.fromkeys(RULES, 0)
    chat_any, chat_side = dict.fromkeys(RULES, 0), dict.fromkeys(RULES, 0)
    needed = sum(len(r.needs) for r in rows)
    for train, test in GroupKFold(n_splits=5).split(rows, groups=[r.task for r in rows]):
        fold = as_model(names, *fit([rows[i] for i in train], names, 10.0), prune=0.05)
        fold = replace(shipped_model, names=fold.names, intercepts=fold.intercepts, weights=fold.weights, nothing_threshold=0.0)
        gated = replace(fold, nothing_threshold=shipped_model.nothing_threshold)
        for i in test:
            tools = fold.read(rows[i].text, side, answers).tools
            needs_nothing = fold.probabilities(rows[i].text)[NOTHING] >= shipped_model.nothing_threshold
            readings = {"no reading of NOTHING": tools, "offer nothing": () if needs_nothing else tools,
                        "only what it is surer of": gated.read(rows[i].text, side, answers).tools}
            for rule, kept in readings.items():
                if rows[i].needs:
                    lost[rule] += len(rows[i].needs & set(tools)) - len(rows[i].needs & set(kept))
                else:
                    chat_any[rule] += bool(kept)
                    chat_side[rule] += bool(set(kept) & side)
    chat = sum(not r.needs for r in rows)
    print(f"{len(rows)} training rows, {needed} needed executors, {chat} messages that need none; NOTHING at "
          f"{shipped_model.nothing_threshold:.2f}")
    for rule in RULES:
        print(f"  {rule:28s} needed executors lost {lost[rule]:3d} ({lost[rule] / needed:.3%}); messages that need none "
              f"offered anything {chat_any[rule] / chat:.1%}, a side effect {chat_side[rule] / chat:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
