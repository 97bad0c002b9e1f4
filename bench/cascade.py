"""The cascade benchmark (issues 19 and 30): the agent tasks asked again, repeated, reworded and with new slot values.

    PYTHONPATH=$PWD python3 bench/cascade.py --lookup-only              # L0 lookup time and rewording recall, no model
    PYTHONPATH=$PWD python3 bench/cascade.py --model /path/to/model.gguf --only diary_last_lines,csv_total --json out.json
    PYTHONPATH=$PWD python3 bench/cascade.py --model /path/to/model.gguf --paired --json out.json   # the full measure
    PYTHONPATH=$PWD python3 bench/cascade.py --model /path/to/model.gguf --only diary_last_lines --max-requests 3  # a smoke run

Each task gets one fresh home (the default layout, as bench/agent_tasks.py
builds it) that keeps its log across three passes:

1. the request as the suite words it, with ``--no-cache``: the run without
   the cascade, the baseline. A passing answer is approved (``metnos plans
   approve``), as a user would after a good answer; so is any later passing
   answer the model gave (a baseline that failed leaves L0 to a later pass).
2. the request reworded (same values: L0's cosine search), and the request
   with new slot values (the task's file or folder copied under another
   name: L1, on the template of the walk the user approved; where nothing
   was approved, the model, whose good turn is a walk L1 learns from).
3. the request exactly as in pass 1 (L0's exact key), and the request with
   a third set of values (L1's template).

A copied file keeps its content, so the task's own check still says whether
the answer is right. Reported, as Agentic Plan Caching reports a plan cache
(Zhang et al., 2025): the hit rate (the share of later requests no model was
asked for, per layer and per kind of request: repeated, reworded, new
values), the accuracy kept against the model, and the model tokens and time
saved, with the lookup's own cost (``lookup_ms``); and the cascade's wrong
answers: hits the task's check fails, and of those the ones the model
answered right. With no model, the L0 lookup time at 1k, 10k and 100k
approved plans and the rewording recall of the packaged WordLlama vectors
against hashed n-grams.

Against the model means, by default, against the task's pass 1 (the model
asked once, with ``--no-cache``). With ``--paired`` every later request is
also asked of the model, with ``--no-cache``, in a twin home built the same
way whose log never teaches the cascade (a model walk with another chain
would drop a template, docs/cascade.md): accuracy, tokens and time are then
weighed request by request. It doubles the model's work.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.agent_suite import TASKS, Outcome, Task, build_home  # noqa: E402
from bench.agent_tasks import _events, _metnos, default_model, metnos_env, point_metnos_at, start_pages  # noqa: E402

# How a person might say the same thing another way: the cosine search's test.
REWORDINGS = {
    "diary_last_lines": "Please show me the last two lines of ~/journal/march.txt.",
    "todo_first_item": "Tell me the first item on my todo list in ~/lists/things-to-do.md.",
    "csv_total": "Please tell me the total of the amount column in ~/receipts/groceries.csv.",
    "count_photos": "How many .jpg photos do I have in ~/Pictures?",
    "list_notes": "Please list the markdown files in ~/notes.",
    "today_date": "What's the date today?",
    "error_lines": "Tell me how many lines in ~/logs/server.log contain ERROR.",
    "page_special": "Tell me the special of the day on {url}/menu.html.",
    "api_temperature": "Please fetch {url}/weather.json and tell me the temperature.",
    "package_version": "What version is in ~/projects/garden/package.json?",
    "recipe_eggs": "How many eggs are needed by the recipe in ~/recipes/pancakes.md?",
    "contact_email": "Tell me Elena's email address in ~/contacts.json.",
    "news_headline": "Tell me the headline on {url}/news.html.",
    "largest_document": "Please tell me which is the largest file in ~/Documents.",
}
# Other requests, near in words: a cosine hit on one of these would be a wrong answer.
NEGATIVES = [
    ("Read ~/journal/march.txt and tell me the last two lines.", "Delete ~/journal/march.txt and tell me the last two lines."),
    ("What is the first item on my todo list in ~/lists/things-to-do.md?", "What is the last item on my todo list in ~/lists/things-to-do.md?"),
    ("What is the total of the amount column in ~/receipts/groceries.csv?", "What is the average of the amount column in ~/receipts/groceries.csv?"),
    ("How many .jpg photos are there in ~/Pictures?", "How many .png photos are there in ~/Pictures?"),
    ("List the markdown files in ~/notes.", "Delete the markdown files in ~/notes."),
    ("Which is the largest file in ~/Documents?", "Which is the smallest file in ~/Documents?"),
    ("Save the text 'call the bank on Friday' to ~/notes/bank.md.", "Read the text in ~/notes/bank.md."),
]
_PATH = re.compile(r"~/[\w./\-]+[\w]")


def slot_path(task: Task, home: Path) -> str | None:
    """The first ~/path of the request that is a file or folder of the task's home."""
    for match in _PATH.finditer(task.text):
        if (home / match.group(0)[2:]).exists():
            return match.group(0)
    return None


def with_new_value(task: Task, home: Path, path: str, n: int) -> str:
    """The request with its file (or folder) copied under another name, same content."""
    src = home / path[2:]
    stem, dot, ext = src.name.partition(".")
    dst = src.with_name(f"{stem}-v{n}{dot}{ext}")
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dst)
    new = "~/" + str(dst.relative_to(home))
    return task.text.replace(path, new)


# What each later request is, as a plan cache's workload names it.
KINDS = {(2, "reworded"): "reworded", (2, "new values"): "new values", (3, "original"): "repeated", (3, "new values"): "new values"}


def last_turn(env: dict[str, str]) -> dict[str, Any]:
    consulted = _events(env, "Turn.PlanConsulted")
    replies = _events(env, "Turn.LLMReplied")
    started = _events(env, "Turn.TurnStarted")
    turn_id = started[-1]["aggregate_id"] if started else ""
    mine = [e for e in consulted if e["aggregate_id"] == turn_id]
    layer = mine[-1]["state"]["layer"] if mine else None
    how = mine[-1]["state"].get("how") if mine else None
    lookup_ms = mine[-1]["state"].get("lookup_ms") if mine else None
    tokens = sum(int(((e["state"].get("reply") or {}).get("usage") or {}).get("input_tokens") or 0)
                 + int(((e["state"].get("reply") or {}).get("usage") or {}).get("output_tokens") or 0)
                 for e in replies if e["aggregate_id"] == turn_id)
    calls = sum(1 for e in replies if e["aggregate_id"] == turn_id)
    return {"turn_id": turn_id, "layer": layer, "how": how, "tokens": tokens, "model_calls": calls, "lookup_ms": lookup_ms}


def ask(home: Path, env: dict[str, str], request: str, timeout_s: float, *extra: str) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        proc = _metnos(["ask", "--json", "--yes", *extra, request], env, timeout_s)
        out = next((json.loads(ln) for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None) or {}
        status = out.get("status") or f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
        answer = out.get("answer") or ""
    except Exception as e:  # noqa: BLE001 - a timeout or crash is this request's failure, said
        status, answer = f"error: {type(e).__name__}", ""
    seconds = time.monotonic() - t0
    return {"request": request, "status": status, "answer": answer[:300], "seconds": round(seconds, 2), **last_turn(env)}


def _home(task: Task, llm_url: str, pages_url: str, timeout_s: float, tag: str) -> tuple[Path, dict[str, str]]:
    home = Path(tempfile.mkdtemp(prefix=f"cascadebench-{task.id}-{tag}-"))
    build_home(task, home)
    env = metnos_env(home)
    init = _metnos(["init"], env, 300)
    if init.returncode != 0:
        raise RuntimeError(f"metnos init failed: {init.stderr.strip()[-300:]}")
    point_metnos_at(home, llm_url, timeout_s, pages_url=pages_url)
    return home, env


class Budget:
    """At most ``n`` requests in the whole run (a smoke run); None: no limit."""

    def __init__(self, n: int | None) -> None:
        self.left = n

    def take(self) -> bool:
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def run_task(task: Task, pages_url: str, llm_url: str, timeout_s: float, keep: bool = False, *,
             paired: bool = False, budget: Budget | None = None) -> list[dict[str, Any]]:
    budget = budget or Budget(None)
    homes: list[Path] = []
    rows: list[dict[str, Any]] = []
    try:
        home, env = _home(task, llm_url, pages_url, timeout_s, "cascade")
        homes.append(home)
        twin = None
        if paired:
            twin = _home(task, llm_url, pages_url, timeout_s, "model")
            homes.append(twin[0])
        path = slot_path(task, home)

        def one(pass_no: int, kind: str, request: str, *extra: str) -> dict[str, Any] | None:
            if not budget.take():
                return None
            row = ask(home, env, request.replace("{url}", pages_url), timeout_s, *extra)
            passed, why = task.check(Outcome(row["answer"], home, [], []))
            row.update(task=task.id, pass_no=pass_no, kind=kind, passed=passed, why=why)
            if twin is not None and pass_no > 1:
                alone = ask(twin[0], twin[1], request.replace("{url}", pages_url), timeout_s, "--no-cache")
                model_passed, _ = task.check(Outcome(alone["answer"], twin[0], [], []))
                row["model"] = {"passed": model_passed, "status": alone["status"], "seconds": alone["seconds"],
                                "tokens": alone["tokens"], "answer": alone["answer"]}
            rows.append(row)
            print(f"[{task.id} pass {pass_no} {kind}] {row['layer'] or 'model'} {'pass' if passed else 'FAIL'} "
                  f"{row['seconds']:.1f}s {row['tokens']} tok"
                  + (f"; the model alone: {'pass' if row['model']['passed'] else 'FAIL'} {row['model']['seconds']:.1f}s "
                     f"{row['model']['tokens']} tok" if "model" in row else ""), file=sys.stderr, flush=True)
            return row

        def approving(row: dict[str, Any] | None) -> None:
            # A user approves a good answer the model gave, whichever pass it came in.
            if row is not None and row["passed"] and row["layer"] is None and row["turn_id"]:
                row["approved"] = _metnos(["plans", "approve", row["turn_id"]], env, 120).returncode == 0

        def with_values(n: int) -> str:
            request = with_new_value(task, home, path, n)
            if twin is not None:
                with_new_value(task, twin[0], path, n)
            return request

        approving(one(1, "original", task.text, "--no-cache"))
        approving(one(2, "reworded", REWORDINGS.get(task.id, "Please: " + task.text)))
        if path is not None:
            approving(one(2, "new values", with_values(2)))
        approving(one(3, "original", task.text))
        if path is not None:
            one(3, "new values", with_values(3))
    except Exception as e:  # noqa: BLE001
        rows.append({"task": task.id, "pass_no": 0, "kind": "bench error", "passed": False, "why": f"{type(e).__name__}: {e}",
                     "layer": None, "seconds": 0.0, "tokens": 0, "model_calls": 0, "status": "bench-error"})
    finally:
        for home in homes:
            if keep:
                print(f"kept {home}", file=sys.stderr, flush=True)
            else:
                shutil.rmtree(home, ignore_errors=True)
    return rows


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 3) if whole else None


def _saved(spent: float, baseline: float) -> float | None:
    return round(1 - spent / baseline, 3) if baseline else None


def plan_cache_figures(later: list[dict[str, Any]], base: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What Agentic Plan Caching reports of a plan cache, for these later requests: hit rate, accuracy
    kept against the model, tokens and time saved; against each request's own model run when the
    bench was --paired, else against its task's pass 1."""
    paired = bool(later) and all("model" in r for r in later)

    def model_of(r: dict[str, Any]) -> dict[str, Any]:
        return r["model"] if paired else base.get(r["task"], {"passed": False, "tokens": 0, "seconds": 0.0})

    hits = [r for r in later if r["layer"]]
    right = sum(r["passed"] for r in later)
    model_right = sum(model_of(r)["passed"] for r in later)
    tokens, model_tokens = sum(r["tokens"] for r in later), sum(model_of(r)["tokens"] for r in later)
    seconds, model_seconds = sum(r["seconds"] for r in later), sum(model_of(r)["seconds"] for r in later)
    wrong_hits = [r for r in hits if not r["passed"]]
    return {
        "requests": len(later), "against": "each request's own model run" if paired else "its task's pass 1",
        "hits": len(hits), "hit_rate": _ratio(len(hits), len(later)),
        "accuracy": _ratio(right, len(later)), "model_accuracy": _ratio(model_right, len(later)),
        "accuracy_kept": _ratio(right, model_right),
        "tokens": tokens, "model_tokens": model_tokens, "tokens_saved": _saved(tokens, model_tokens),
        "seconds": round(seconds, 1), "model_seconds": round(model_seconds, 1), "time_saved": _saved(seconds, model_seconds),
        "wrong_hits": len(wrong_hits), "wrong_hits_the_model_got_right": sum(model_of(r)["passed"] for r in wrong_hits),
        "hit_precision": _ratio(len(hits) - len(wrong_hits), len(hits)),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    base = {r["task"]: r for r in rows if r["pass_no"] == 1}
    later = [r for r in rows if r["pass_no"] in (2, 3)]
    layers = {"L0 exact": 0, "L0 cosine": 0, "L1": 0, "model": 0}
    for r in later:
        key = "model" if r["layer"] is None else ("L1" if r["layer"] == "L1" else ("L0 exact" if r["how"] == "exact" else "L0 cosine"))
        layers[key] += 1
    base_acc = sum(r["passed"] for r in base.values()) / max(1, len(base))
    later_acc = sum(r["passed"] for r in later) / max(1, len(later))
    # Weighted as tokens and time are: each later request against its own task's baseline
    # (a task with new values has more later requests than one without).
    base_acc_same = sum(base[r["task"]]["passed"] for r in later if r["task"] in base) / max(1, len(later))
    # Without the cascade each later request would have cost what its task's baseline cost.
    base_tokens = sum(base[r["task"]]["tokens"] for r in later if r["task"] in base)
    base_seconds = sum(base[r["task"]]["seconds"] for r in later if r["task"] in base)
    tokens = sum(r["tokens"] for r in later)
    seconds = sum(r["seconds"] for r in later)
    lookups = [r["lookup_ms"] for r in later if r.get("lookup_ms") is not None]
    return {
        "tasks": len(base), "later_requests": len(later), "answered_by": layers,
        "hit_rate": {k: round(v / max(1, len(later)), 3) for k, v in layers.items()},
        "baseline_accuracy": round(base_acc, 3), "cascade_accuracy": round(later_acc, 3),
        "accuracy_ratio": round(later_acc / base_acc, 3) if base_acc else None,
        "baseline_accuracy_same_requests": round(base_acc_same, 3),
        "accuracy_ratio_same_requests": round(later_acc / base_acc_same, 3) if base_acc_same else None,
        "baseline_tokens": base_tokens, "cascade_tokens": tokens,
        "tokens_saved": round(1 - tokens / base_tokens, 3) if base_tokens else None,
        "baseline_s_per_request": round(base_seconds / max(1, len(later)), 2),
        "cascade_s_per_request": round(seconds / max(1, len(later)), 2),
        "time_saved": round(1 - seconds / base_seconds, 3) if base_seconds else None,
        "median_s_cascade_hit": round(statistics.median([r["seconds"] for r in later if r["layer"]]), 2) if any(r["layer"] for r in later) else None,
        "median_lookup_ms": round(statistics.median(lookups), 1) if lookups else None,
        "plan_cache": plan_cache_figures(later, base),
        "by_kind": {kind: plan_cache_figures([r for r in later if KINDS.get((r["pass_no"], r["kind"])) == kind], base)
                    for kind in ("repeated", "reworded", "new values")},
    }


def print_figures(summary: dict[str, Any]) -> None:
    """The plan cache's figures, one line per kind of request, ratios as percentages."""
    def pct(x: float | None) -> str:
        return "   -" if x is None else f"{100 * x:5.1f}%"

    print(f"against {summary['plan_cache']['against']}; lookup median {summary['median_lookup_ms']} ms", file=sys.stderr)
    print(f"{'requests':<12}{'n':>4}{'hit rate':>10}{'acc. kept':>11}{'tokens saved':>14}{'time saved':>12}{'wrong hits':>12}",
          file=sys.stderr)
    for name, f in [("all", summary["plan_cache"]), *summary["by_kind"].items()]:
        print(f"{name:<12}{f['requests']:>4}{pct(f['hit_rate']):>10}{pct(f['accuracy_kept']):>11}{pct(f['tokens_saved']):>14}"
              f"{pct(f['time_saved']):>12}{f['wrong_hits']:>6} ({f['wrong_hits_the_model_got_right']} right alone)", file=sys.stderr)


# No model: lookup time and rewording recall --------------------------------------------

def lookup_times(sizes: tuple[int, ...] = (1_000, 10_000, 100_000), repeats: int = 200) -> list[dict[str, Any]]:
    """consult() on a plans state of N approved entries: an exact hit, a reworded (cosine) hit, a miss."""
    import random

    from metnos.runtime.cascade.consult import CascadeSettings, PlanConsultant
    from metnos.runtime.cascade.embedding import VectorIndex, load_embedder
    from domain.cascade.request import intent_of, normalise, request_key

    embedder = load_embedder()
    verbs = ["read", "list", "count", "show", "sum", "sort", "describe", "find", "fetch", "check"]
    things = ["notes", "invoices", "photos", "logs", "receipts", "songs", "letters", "recipes", "tickets", "drafts", "videos", "reports"]
    plan = {"steps": [{"executor": "read_files", "version": "1.0.0", "args": {"paths": ["~/x"]}}], "answer": [{"text": "ok"}]}
    out = []
    for n in sizes:
        rng = random.Random(n)
        texts = [f"{rng.choice(verbs)} the {rng.choice(things)} of project {i} from week {i % 53} in folder {rng.choice(things)}" for i in range(n)]
        entries = {}
        by_key = {}
        for i, text in enumerate(texts):
            eid = f"e{i:06d}"
            entries[eid] = {"id": eid, "text": text, "key": request_key(text), "state": "approved", "plan": plan,
                            "plan_id": f"p{i}", "slots": [s.to_json() for s in intent_of(text)[1]], "turn_id": eid}
            by_key[request_key(text)] = eid
        state = {"entries": entries, "by_key": by_key, "templates": {}, "anti": {}}
        consultant = PlanConsultant(plans=lambda s=state: s, current=lambda: {"read_files": {"version": "1.0.0"}},
                                    now=lambda: "2026-01-01T00:00:00+00:00", validate=lambda _p: [],
                                    settings=CascadeSettings(), embedder=lambda: embedder)
        t0 = time.perf_counter()
        consultant.consult(texts[0] + " please")  # builds the index once (embeds every entry)
        build_s = time.perf_counter() - t0
        row: dict[str, Any] = {"entries": n, "index_build_s": round(build_s, 2), "embedder": embedder.name}
        probes = {"exact": [texts[rng.randrange(n)] for _ in range(repeats)],
                  "cosine": ["please " + texts[rng.randrange(n)] for _ in range(repeats)],
                  "miss": [f"water the plants on balcony {i}" for i in range(repeats)]}
        for kind, requests in probes.items():
            times = []
            hits = 0
            for request in requests:
                t = time.perf_counter()
                found = consultant.consult(request)
                times.append((time.perf_counter() - t) * 1000)
                hits += found.layer == "L0"
            times.sort()
            row[kind] = {"median_ms": round(statistics.median(times), 3), "p99_ms": round(times[int(0.99 * (len(times) - 1))], 3),
                         "hit_rate": round(hits / len(requests), 3)}
        # The baseline of the same run: every vector scored on all its dimensions.
        index = consultant._vectors(state)  # noqa: SLF001 - the index the lookups above used
        flat = VectorIndex(index.ids, index.matrix)
        queries = embedder.embed([normalise(r) for r in probes["cosine"][:50]])
        for name, ix in (("full_product", flat), ("index_search", index)):
            times = []
            for q in queries:
                t = time.perf_counter()
                ix.nearest(q, k=3)
                times.append((time.perf_counter() - t) * 1000)
            row[name + "_median_ms"] = round(statistics.median(times), 3)
        row["full_over_index"] = round(row["full_product_median_ms"] / max(row["index_search_median_ms"], 1e-6), 2)
        # Same best similarity as the full product (a tie between two entries counts as the same answer).
        row["index_agrees"] = f"{sum(abs(flat.nearest(q, 1)[0][1] - index.nearest(q, 1)[0][1]) < 1e-5 for q in queries)}/{len(queries)}"
        out.append(row)
        print(f"L0 lookup, {n} entries: {json.dumps(row)}", file=sys.stderr, flush=True)
    return out


def rewording_recall(threshold: float) -> list[dict[str, Any]]:
    from metnos.runtime.cascade.embedding import HashedNgramEmbedder, WordLlamaEmbedder
    from domain.cascade.request import differing_words, normalise

    pairs = [(t.text, REWORDINGS[t.id]) for t in TASKS if t.id in REWORDINGS]
    out = []
    for embedder in (WordLlamaEmbedder(), HashedNgramEmbedder()):
        def sim(a: str, b: str) -> float:
            va, vb = embedder.embed([normalise(a), normalise(b)])
            return float(va @ vb)

        hits = [sim(a, b) for a, b in pairs]
        wrong = [sim(a, b) for a, b in NEGATIVES]
        # A rewording hits when it is near enough and changes no word that asks something.
        hits_guarded = [s >= threshold and not differing_words(a, b) for (a, b), s in zip(pairs, hits, strict=True)]
        guarded = [s for (a, b), s in zip(NEGATIVES, wrong, strict=True) if s >= threshold and not differing_words(a, b)]
        out.append({"embedder": embedder.name, "threshold": threshold, "pairs": len(pairs),
                    "recall_vectors_only": round(sum(s >= threshold for s in hits) / len(hits), 3),
                    "recall": round(sum(hits_guarded) / len(hits), 3),
                    "median_similarity": round(statistics.median(hits), 3),
                    "negatives": len(NEGATIVES), "negatives_over_threshold": sum(s >= threshold for s in wrong),
                    "negatives_past_the_word_guard": len(guarded)})
        print(f"rewording recall: {json.dumps(out[-1])}", file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    from metnos.settings.cascade import DEFAULT_COSINE

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, help="a GGUF file (default: the installed embedded model)")
    ap.add_argument("--url", help="use this running OpenAI-compatible server instead of starting one")
    ap.add_argument("--only", help="comma list of task ids (default: the tasks with a rewording)")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--lookup-only", action="store_true", help="only the L0 lookup time and the rewording recall (no model)")
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep each task's home (its log: metnos turns list, plans list)")
    ap.add_argument("--paired", action="store_true",
                    help="ask every later request of the model too (--no-cache, in a twin home): figures request by request")
    ap.add_argument("--max-requests", type=int, help="stop after this many requests in all (a smoke run)")
    args = ap.parse_args(argv)

    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(),
                              "load_avg_1m": round(os.getloadavg()[0], 2)}
    if args.lookup_only or args.max_requests is None:
        report["lookup"] = lookup_times(tuple(int(s) for s in args.sizes.split(",")))
        report["rewording_recall"] = rewording_recall(DEFAULT_COSINE)
    if not args.lookup_only:
        ids = [s.strip() for s in args.only.split(",")] if args.only else list(REWORDINGS)
        tasks = [t for t in TASKS if t.id in ids]
        server = None
        if args.url:
            llm_url = args.url.rstrip("/")
        else:
            from metnos.mechanisms.llm.embedded import EmbeddedServer

            model = args.model or default_model()
            server = EmbeddedServer(model, threads=args.threads or None, log_path=Path(tempfile.gettempdir()) / "cascadebench-llm.log")
            llm_url = server.start()
            report["model"] = model.name
        pages, pages_url = start_pages()
        rows: list[dict[str, Any]] = []
        budget = Budget(args.max_requests)
        try:
            for task in tasks:
                if budget.left is not None and budget.left <= 0:
                    break
                rows.extend(run_task(task, pages_url, llm_url, args.timeout, args.keep, paired=args.paired, budget=budget))
                if args.json:
                    args.json.write_text(json.dumps({**report, "rows": rows, "summary": summarize(rows)}, indent=2) + "\n")
        finally:
            pages.shutdown()
            if server is not None:
                server.stop()
        report["rows"] = rows
        report["summary"] = summarize(rows)
        print(json.dumps(report["summary"], indent=2))
        print_figures(report["summary"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
