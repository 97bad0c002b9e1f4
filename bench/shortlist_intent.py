"""The shortlist with the model's intent beside the rules, on the written requests (issue 30, item 6).

    PYTHONPATH=$PWD python3 bench/shortlist_intent.py --model ~/.local/share/metnos/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --threads 2 --json shortlist-intent-1.5b.json [--misses held_out]

bench/shortlist_recall.py measures the rules alone, offline. This bench asks the
model too: the intent extractor a turn runs with ``[runtime] intent = "model"``
(metnos/runtime/turn/intent_model.py: its prompt, the catalogue's names and
summaries, the reply held to a grammar of the listed names), once for each of
the 480 requests of bench/shortlist_requests.jsonl, on the embedded model's
server. The replies are kept in ``--cache`` so the variants can be compared again
without the model.

Variants, each with its recall (per request and per needed executor) and the
share of read-only requests offered an executor with side effects:

* shortlist: the rules alone (what a turn gets by default);
* shortlist + intent: the names the model gives join, and the rule on side
  effects still withholds those the request's words do not ask for (what
  ``intent = "model"`` does);
* shortlist + intent, side effects too: the model's names join whatever they are;
* intent alone: only what the model names (its own recall, for scale).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.shortlist_recall import REQUEST_SET, SPLITS, catalogue, written_figures, written_requests  # noqa: E402
from metnos.runtime.step.catalogue import builtin_tools  # noqa: E402
from metnos.runtime.step.prefilter import PrefilterIndex  # noqa: E402
from metnos.runtime.turn.intent_model import INTENT_PROMPT, extract_intent  # noqa: E402
from metnos.runtime.turn.shortlist import complete  # noqa: E402
from metnos.settings.turn import DEFAULT_POOL_SIZE  # noqa: E402


def ask_all(model: Path, texts: list[str], executors: list[tuple[str, str]], *, threads: int | None, cache: Path) -> dict[str, dict]:
    """The intent extractor's names for each text, from ``cache`` where it has them."""
    from metnos.mechanisms.llm.embedded import EmbeddedServer
    from metnos.mechanisms.llm.openai_compat import OpenAICompatProvider

    found: dict[str, dict] = json.loads(cache.read_text()) if cache.exists() else {}
    key = model.name
    todo = [t for t in texts if f"{key}\t{t}" not in found]
    if not todo:
        return {t: found[f"{key}\t{t}"] for t in texts}
    server = EmbeddedServer(model, threads=threads, log_path=Path(tempfile.gettempdir()) / "shortlist-intent-llm.log")
    url = server.start()
    provider = OpenAICompatProvider(url=url, model="bench", grammar="on", max_tokens=96, temperature=0.0, api_key_env=None, timeout_s=600.0)
    try:
        for n, text in enumerate(todo, 1):
            started = time.monotonic()
            got = extract_intent(lambda *a, **k: None, lambda tier, messages, tools, **kw: provider.complete(messages, tools, **kw),
                                 tier="middle", request_text=text, executors=executors)
            found[f"{key}\t{text}"] = {"tools": list(got.tools), "problem": got.problem, "seconds": round(time.monotonic() - started, 2)}
            if n % 20 == 0 or n == len(todo):
                cache.write_text(json.dumps(found, ensure_ascii=False, indent=0))
                print(f"  {n}/{len(todo)} asked", file=sys.stderr)
    finally:
        provider.close()
        server.stop()
    return {t: found[f"{key}\t{t}"] for t in texts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--pool", type=int, default=DEFAULT_POOL_SIZE)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "shortlist-intent-cache.json")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--misses", choices=(*SPLITS, "all"))
    parser.add_argument("--set", type=Path, default=REQUEST_SET, help="the written requests (a blind set: bench/shortlist_requests_blind3.jsonl)")
    args = parser.parse_args(argv)

    entries = catalogue()
    index = PrefilterIndex(entries)
    side_effecting = frozenset(e.name for e in entries if e.side_effects)
    builtins = set(builtin_tools())
    # What a turn lists for the extractor: the executors, not the builtins (metnos/runtime/turn/opening.py).
    executors = [(e.name, e.summary) for e in index.entries if e.name not in builtins]
    rows = written_requests(args.set)
    intents = ask_all(args.model, [r.text for r in rows], executors, threads=args.threads, cache=args.cache)

    def rules(text: str, intent: tuple[str, ...] = ()) -> list[str]:
        ranking = index.query(text, pool_size=args.pool).to_json()
        return [c["name"] for c in complete(ranking, index, text, intent, pool_size=args.pool)["candidates"]]

    pools = {
        "shortlist": {r.text: rules(r.text) for r in rows},
        "shortlist + intent": {r.text: rules(r.text, tuple(intents[r.text]["tools"])) for r in rows},
        "shortlist + intent, side effects too": {r.text: list(dict.fromkeys(rules(r.text) + intents[r.text]["tools"])) for r in rows},
        "intent alone": {r.text: intents[r.text]["tools"] for r in rows},
    }
    report = {"model": args.model.name, "pool_size": args.pool, "requests": len(rows),
              "unreadable": sum(bool(i["problem"]) for i in intents.values()),
              "median_s": sorted(i["seconds"] for i in intents.values())[len(intents) // 2], "variants": {}}
    print(f"{args.model.name}: {len(rows)} written requests, catalogue of {len(entries)}, pool {args.pool}; "
          f"intent replies unreadable: {report['unreadable']}, median {report['median_s']} s a request")
    print(f"  {'variant':<38} {'part':<9} {'recall':>7} {'(per exec.)':>11} {'side eff.':>10} {'pool':>5}")
    for label, pool in pools.items():
        report["variants"][label] = {}
        for part in ("all", *(s for s in SPLITS if any(r.split == s for r in rows))):
            m = written_figures([r for r in rows if part == "all" or r.split == part], pool, side_effecting)
            report["variants"][label][part] = m
            print(f"  {label:<38} {part:<9} {m['recall']:>7.1%} {m['recall_per_executor']:>11.1%} "
                  f"{m['side_effects_offered']:>10.1%} {m['mean_pool']:>5.1f}")
    if args.misses:
        for label in ("shortlist + intent", "shortlist + intent, side effects too"):
            m = report["variants"][label][args.misses]
            for miss in m["misses"]:
                print(f"    [{label}] misses {', '.join(miss['missing'])}: {miss['text']}")
            for o in m["offered"]:
                print(f"    [{label}] offers {', '.join(o['side_effects'])}: {o['text']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
