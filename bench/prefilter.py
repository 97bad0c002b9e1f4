"""Benchmark of the pre-filter query (issue 5, item 8).

Targets: under 1 ms for 300 executors, under 20 ms for 10,000. The figure
that counts is the median query time against an index built once. Next to
it, a baseline measured in the same run on the same machine: a plain loop
that tokenises the request and intersects it with one precomputed word set
per entry, which is the least any bag-of-words ranking has to do. The ratio
makes the figure comparable across machines.

Run: python bench/prefilter.py [--runs N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metnos.runtime.step.prefilter import CatalogueEntry, PrefilterIndex  # noqa: E402
from metnos.runtime.step.text import content_tokens  # noqa: E402

VERBS = ["read", "find", "list", "get", "filter", "sort", "group", "classify", "compute",
         "compare", "extract", "describe", "render", "move", "delete", "send", "share",
         "write", "set", "create", "change", "order", "compress", "run"]
OBJECTS = ["files", "messages", "urls", "events", "persons", "notes", "images", "entries",
           "lists", "credentials", "issues", "calendars", "contacts", "photos", "feeds",
           "tasks", "alarms", "songs", "videos", "maps", "pages", "documents", "accounts"]

REQUESTS = [
    "read the file ~/notes/diary.md and tell me the last three lines",
    "fetch https://httpbin.org/get and save it to a file",
    "which mail accounts do you have",
    "find the photos from last summer and compress the old ones",
    "send a message to Lucia saying I am out until seven",
    "quali eventi ho in calendario domani mattina",
]


def synthetic_catalogue(n: int, rng: random.Random) -> list[CatalogueEntry]:
    vocab = [f"w{i}" for i in range(4000)] + OBJECTS + VERBS + [
        "web", "http", "url", "fetch", "mail", "file", "diary", "calendar", "photo", "message",
        "lines", "save", "summer", "accounts", "tomorrow", "domani", "eventi", "calendario"]
    entries = []
    for i in range(n):
        verb = VERBS[i % len(VERBS)]
        obj = OBJECTS[(i // len(VERBS)) % len(OBJECTS)]
        name = f"{verb}_{obj}_{i}"
        affinity = tuple(rng.sample(vocab, 8)) + (" ".join(rng.sample(vocab, 2)),)
        desc = " ".join(rng.sample(vocab, 25))
        entries.append(CatalogueEntry(name=name, version="1.0.0", summary=f"{verb} {obj}",
                                      descriptions={"en": desc}, affinity=affinity))
    return entries


def baseline(request: str, entry_sets: list[frozenset[str]]) -> list[int]:
    query = content_tokens(request)
    return [len(query & s) for s in entry_sets]


def median_us(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    targets = {300: 1000.0, 10_000: 20_000.0}
    print(f"{'executors':>10} {'build ms':>9} {'query us':>9} {'baseline us':>12} "
          f"{'ratio':>6} {'target us':>10}  ok")
    worst_ok = True
    for n, target in targets.items():
        entries = synthetic_catalogue(n, rng)
        t0 = time.perf_counter()
        index = PrefilterIndex(entries)
        build_ms = (time.perf_counter() - t0) * 1000
        sets = [content_tokens(" ".join(e.affinity) + " " + e.description_text()) for e in entries]
        sets = [frozenset(s) for s in sets]
        query_us = statistics.median(
            median_us(lambda r=r: index.query(r, pool_size=12), args.runs) for r in REQUESTS)
        base_us = statistics.median(
            median_us(lambda r=r: baseline(r, sets), max(args.runs // 4, 10)) for r in REQUESTS)
        ok = query_us < target
        worst_ok &= ok
        print(f"{n:>10} {build_ms:>9.1f} {query_us:>9.1f} {base_us:>12.1f} "
              f"{query_us / base_us:>6.2f} {target:>10.0f}  {'yes' if ok else 'NO'}")
    sys.exit(0 if worst_ok else 1)


if __name__ == "__main__":
    main()
