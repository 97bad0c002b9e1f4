"""The shortlist a turn's model is shown: the pre-filter's ranking, completed.

The bag-of-words ranking (:mod:`metnos.turn.prefilter`) misses the source a
request needs when the request does not use its words ("the total of the
amount column in X.csv" scores compute_entries, never read_files), and it
offers executors with side effects to requests that only read, on a shared
word ("files"). Two rules, measured by bench/shortlist_recall.py, complete it:

* What the request names is where the data comes from
  (:mod:`metnos.turn.intent`): a named file brings read_files, a folder
  find_files, a URL get_urls, when the catalogue has them.
* An executor with side effects stays only when the request names its
  action: one of its action tags (:attr:`PrefilterIndex.action_tags`) or its
  own name is in the request. The others are withheld, and the ranking says
  which and why. One whose action the request names comes in even when the
  ranking cut it ("fetch the page, save it to X": ``save`` is write_files's,
  which tied with two others past the pre-filter's K).
* A recurring-task builtin stays only when the request speaks of schedules
  (one of its affinity phrases, or its name): their descriptions share
  everyday verbs ("list", "show", "run") with requests about files, and a
  small model given ``list_recurring`` for "list the files in ~/x" calls it.

With ``[runtime] intent = "model"`` the executors the intent extractor names
(:mod:`metnos.turn.intent_model`) join too, before the rule on side effects,
which holds for them as for any.

All are recorded in the ranking (``via: "named_source"``, ``"named_action"`` and ``"intent"`` candidates and the
``withheld`` list), so a replay that runs the same code compares them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from metnos.turn.catalogue import BUILTIN_AFFINITY
from metnos.turn.intent import named_targets
from metnos.turn.prefilter import PrefilterIndex
from metnos.turn.text import content_tokens

# executor -> which of the request's named targets it reads
NAMED_SOURCES: tuple[tuple[str, str], ...] = (("read_files", "files"), ("find_files", "folders"), ("get_urls", "urls"))


def complete(ranking: Mapping[str, Any], index: PrefilterIndex, request_text: str,
             intent_tools: Sequence[str] = ()) -> dict[str, Any]:
    """``ranking`` (the pre-filter event's payload) with named sources (and the
    executors the intent extractor named) added, and side effects the request
    does not ask for withheld."""
    out = copy.deepcopy(dict(ranking))
    candidates: list[dict[str, Any]] = out.get("candidates", [])
    known = {e.name: e for e in index.entries}
    in_pool = {c["name"] for c in candidates}
    named = named_targets(request_text).to_json()
    for executor, kind in NAMED_SOURCES:
        if named[kind] and executor in known and executor not in in_pool:
            candidates.append({"name": executor, "version": known[executor].version, "score": 0.0, "affinity_hits": [],
                               "description_hits": [], "via": "named_source", "phrase": named[kind][0]})
            in_pool.add(executor)
    for name in intent_tools:
        if name in known and name not in in_pool:
            candidates.append({"name": name, "version": known[name].version, "score": 0.0, "affinity_hits": [],
                               "description_hits": [], "via": "intent", "phrase": ""})
            in_pool.add(name)
    words = content_tokens(request_text)
    lowered = request_text.casefold()
    for entry in index.entries:
        tags = index.action_tags.get(entry.name)
        if tags is None or entry.name in in_pool or entry.name in BUILTIN_AFFINITY:
            continue
        asked = next((tag for tag in sorted(tags, key=sorted) if tag <= words), None)
        if asked is not None:
            candidates.append({"name": entry.name, "version": entry.version, "score": 0.0, "affinity_hits": sorted(asked),
                               "description_hits": [], "via": "named_action", "phrase": " ".join(sorted(asked))})
            in_pool.add(entry.name)
    kept, withheld = [], []
    for c in candidates:
        if c["name"] in BUILTIN_AFFINITY and not c.get("affinity_hits") and c["name"] not in lowered:
            withheld.append({"name": c["name"], "reason": "a recurring-task tool the request does not ask for"})
            continue
        tags = index.action_tags.get(c["name"])
        if tags is None or c["name"] in lowered or any(tag <= words for tag in tags):
            kept.append(c)
        else:
            withheld.append({"name": c["name"], "reason": "side effects the request does not ask for"})
    out["candidates"] = kept
    if withheld:
        out["withheld"] = withheld
    return out


def shortlist(index: PrefilterIndex, request_text: str, *, pool_size: int) -> dict[str, Any]:
    """The ranking and its completion, without the mnestome's boost (which the
    loop applies in between, through its port)."""
    return complete(index.query(request_text, pool_size=pool_size).to_json(), index, request_text)
