"""Does the pre-filter offer the executors a request needs, and only those it may use?
(issue 17, item 3)

Two figures over a set of everyday requests, each with the executors a
sensible plan needs and whether it asks for a change:

* recall: the share of requests whose needed executors are all on the
  shortlist the model is shown (target 100%);
* side effects offered: the share of read-only requests whose shortlist
  holds an executor with side effects (target 0%; a request that names the
  change, "delete", "move", "send", may be offered it).

Each figure is printed for the ranking alone (the bag-of-words pre-filter of
seeds/002 ch. 5, the baseline) and for the shortlist the turn loop really
uses (:func:`metnos.runtime.turn.shortlist.shortlist`), measured in the same run on
the seed catalogue (executors/*/manifest.toml plus the runtime builtins), with
an empty mnestome. The requests live here only; nothing of them is in the
runtime. The agent benchmark's tasks (bench/agent_suite.py) are measured too,
with the needs judged here (``AGENT_NEEDS``); those requests were not used to
choose any rule or tag, so their figures are held out.

Issue 30, item 6: bench/shortlist_requests.jsonl holds 420 requests written
as people write them (70 tasks, six wordings each: a plain one, another verb,
a typo, a casual one, two in Italian), each with the executors it needs and
whether it is read-only, written before the affinity tags were read and split
by task into a dev half (looked at while improving the rules) and a held-out
half (never looked at). On it three offers are compared: the shortlist, the
whole catalogue when it fits the pool (``[turn] offer = "catalogue"``, side
effects the request does not ask for still withheld), and the whole catalogue
with nothing withheld (the ceiling of recall). Recall is given per request
(every needed executor offered) and per needed executor. With ``--tokens
MODEL.gguf`` the first prompt of each request is sized for both offers with
the model's own tokenizer and Metnos's chat template (bench/prompt_tokens.py,
no model started), against the 600 tokens of bench/first_prompt.py. With ``--intent
MODEL.gguf`` each written request is also put to the intent extractor (``[runtime] intent =
"model"``, metnos/runtime/turn/intent_model.py) on that model, served embedded with its
grammar, as a turn asks it; the executors it names join the shortlist (and the shaped
offer) as they join a turn's, the rule on side effects after them.

Nine more sets, bench/shortlist_requests_blind*.jsonl, were written by writers shown the
catalogue's names and descriptions only; each is measured and printed on its own (a split of
its own name). The third was measured once, after the rules it judges were fixed; the fourth
and the fifth each once with the classifier then shipped, before it was retrained on more
writers' requests; the sixth to the ninth were sealed: measured after the model was chosen,
their misses never read (the ninth once, after the rule on messages read as needing nothing was
chosen on the training requests alone).

"shortlist, learned change reading" is ``[turn] offer = "gated"``: the shortlist, with no side
effect offered to a request the classifier reads as changing nothing.

"shortlist and the learned offer" is ``[turn] offer = "learned"``: what the shipped classifier names
(metnos/runtime/step/learned_offer.py), learned by training/train_offer.py from training/offer/, which
holds none of the requests measured here, beside what the request's words name; of the ranking's
guesses, only those the classifier never learned.

Run: PYTHONPATH=$PWD python3 bench/shortlist_recall.py [--pool N] [--json out.json] [--misses [dev]]
                                                        [--tokens MODEL.gguf] [--intent MODEL.gguf [--threads N]]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from metnos.mechanisms.executors.manifest import load_manifest  # noqa: E402
from metnos.runtime.step.catalogue import builtin_tools, catalogue_entry  # noqa: E402
from metnos.runtime.step.prefilter import CatalogueEntry, PrefilterIndex  # noqa: E402
from metnos.settings.turn import DEFAULT_POOL_SIZE, OFFERS  # noqa: E402
from metnos.runtime.turn.shortlist import complete, shortlist  # noqa: E402


@dataclass(frozen=True)
class Request:
    text: str
    needs: frozenset[str]
    changes: bool = False  # the request asks for a change (names it)


def R(text: str, *needs: str, changes: bool = False) -> Request:  # noqa: N802 - a table row
    return Request(text, frozenset(needs), changes)


REQUESTS: tuple[Request, ...] = (
    # reading and answering
    R("read ~/notes/diary.md and tell me the last three lines", "read_files"),
    R("what is the total of the amount column in ~/receipts/groceries.csv", "read_files", "compute_entries"),
    R("what is the first item on my todo list in ~/notes/todo.md", "read_files"),
    R("how many lines are in ~/logs/app.log", "read_files", "compute_entries"),
    R("show me the contents of ~/.config/app/settings.json", "read_files"),
    R("what is the average of the score field in ~/data/results.jsonl", "read_files", "compute_entries"),
    R("which is the most expensive item in ~/receipts/march.csv", "read_files", "sort_entries"),
    R("list the rows of ~/data/people.csv whose city is Rome", "read_files", "filter_entries"),
    R("sort the lines of ~/notes/names.txt alphabetically and show them", "read_files", "sort_entries"),
    R("summarise ~/reports/q3.md in two sentences", "read_files"),
    R("does ~/notes/ideas.txt mention the word garden", "read_files"),
    # finding files
    R("which is the largest document in ~/Documents", "find_files", "sort_entries"),
    R("find the markdown files in ~/docs and describe them", "find_files", "describe_entries"),
    R("how many pdf files are there in ~/Downloads", "find_files", "compute_entries"),
    R("what is the newest file in ~/projects", "find_files", "sort_entries"),
    R("list the photos in ~/Pictures taken in 2023", "find_files", "filter_entries"),
    R("which files in ~/work are bigger than 1 MB", "find_files", "filter_entries"),
    R("find the files in ~/notes whose name starts with meeting", "find_files", "filter_entries"),
    R("show me the three oldest files in ~/archive", "find_files", "sort_entries"),
    R("what is the total size of the files in ~/music", "find_files", "compute_entries"),
    R("which files are in both ~/a and ~/b", "find_files", "filter_lists"),
    # the web and the clock
    R("fetch https://example.org/news and tell me the headline", "get_urls"),
    R("what does the page at http://127.0.0.1:8000/status say", "get_urls"),
    R("what time is it now", "get_now"),
    R("what is today's date", "get_now"),
    R("how many days until the first of December", "get_now"),
    # changes, named
    R("delete the .tmp files in ~/scratch", "find_files", "delete_files", changes=True),
    R("remove ~/old/backup.zip", "delete_files", changes=True),
    R("move the photos in ~/Pictures/inbox into folders by date", "find_files", "move_files", changes=True),
    R("rename ~/notes/draft.md to ~/notes/final.md", "move_files", changes=True),
    R("move every pdf from ~/Downloads to ~/Documents/pdf", "find_files", "move_files", changes=True),
    R("save the text 'buy milk' to ~/notes/shopping.txt", "write_files", changes=True),
    R("fetch https://example.org/page and save it to ~/page.html", "get_urls", "write_files", changes=True),
    R("write the current time to ~/clock.txt", "get_now", "write_files", changes=True),
    R("append a line 'call mum' to ~/notes/todo.md", "write_files", changes=True),
    R("send a message to Anna saying I will be late", "send_messages", changes=True),
    R("send me the last line of ~/notes/diary.md as a message", "read_files", "send_messages", changes=True),
    R("remind me every Monday at 9 to water the plants", "schedule_recurring", changes=True),
    R("every day at 8 send me the time", "schedule_recurring", changes=True),
    R("cancel the reminder about the plants", "list_recurring", "cancel_recurring", changes=True),
    # chains of reading
    R("read ~/data/sales.csv and tell me the largest amount", "read_files", "sort_entries"),
    R("count the words 'error' in ~/logs/server.log", "read_files", "filter_entries"),
    R("list my scheduled reminders", "list_recurring"),
    R("find the csv files in ~/data and tell me how many there are", "find_files", "compute_entries"),
)


REQUEST_SET = REPO / "bench" / "shortlist_requests.jsonl"
# Three sets written on 2026-12-01 by writers shown the catalogue's names and descriptions only, never the
# tags, the rules or another set (docs/benchmarks.md): 504 requests (84 tasks) and 426 (71 tasks, one
# person's week), whose misses then shaped the rules of that day, and 474 (79 tasks, two other people),
# measured once, after those rules were fixed; two more (480 each) on 2026-12-01 for the learned offer, and a
# sixth on 2026-12-02 by a writer with the training writers' brief (training/offer/BRIEF.md), sealed until
# measured once; the seventh to the ninth likewise (the ninth on 2026-12-03: 470 rows, ten taken out that were
# word for word in a training file or in the runtime's own text).
BLIND_SETS = tuple(REPO / "bench" / f"shortlist_requests_{name}.jsonl" for name in ("blind", "blind2", "blind3", "blind4", "blind5", "blind6", "blind7", "blind8", "blind9"))
# Messages that need no executor (greetings, thanks, questions the model answers from its own words), written
# apart from the training files and sealed: what is measured on them is what the offer adds where nothing is asked.
CHAT_SET = REPO / "bench" / "shortlist_requests_chat.jsonl"
SPLITS = ("dev", "held_out", "blind", "blind2", "blind3", "blind4", "blind5", "blind6", "blind7", "blind8", "blind9", "chat")
FIRST_PROMPT_LIMIT = 600  # bench/first_prompt.py, tests/integration/test_first_prompt.py


@dataclass(frozen=True)
class Written:
    """A request of bench/shortlist_requests.jsonl or of a blind set."""

    task: str
    split: str
    lang: str
    form: str
    text: str
    needs: frozenset[str]
    read_only: bool


def written_requests(path: Path = REQUEST_SET) -> list[Written]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row["split"] not in SPLITS:
            raise ValueError(f"{path}:{n}: split must be one of {SPLITS}, not {row['split']!r}")
        rows.append(Written(row["task"], row["split"], row["lang"], row["form"], row["text"], frozenset(row["needs"]),
                            bool(row["read_only"])))
    return rows


def offered(index: PrefilterIndex, text: str, *, pool: int, variant: str) -> list[str]:
    """The executors ``variant`` offers for ``text``: one of OFFERS, "ranking" or "everything"."""
    if variant == "ranking":
        return [c.name for c in index.query(text, pool_size=pool).candidates]
    if variant == "everything":
        return [e.name for e in index.entries]
    return [c["name"] for c in shortlist(index, text, pool_size=pool, offer=variant)["candidates"]]


def written_figures(rows: list[Written], pools: dict[str, list[str]], side_effecting: frozenset[str]) -> dict:
    """Recall per request and per needed executor, side effects offered to read-only requests."""
    per_executor: dict[str, list[int]] = {}
    whole = needed = met = 0
    misses, offers = [], []
    for r in rows:
        got = set(pools[r.text])
        missing = r.needs - got
        whole += not missing
        needed += len(r.needs)
        met += len(r.needs) - len(missing)
        for name in r.needs:
            per_executor.setdefault(name, [0, 0])
            per_executor[name][0] += name in got
            per_executor[name][1] += 1
        if missing:
            misses.append({"split": r.split, "text": r.text, "missing": sorted(missing)})
        if r.read_only and got & side_effecting:
            offers.append({"split": r.split, "text": r.text, "side_effects": sorted(got & side_effecting)})
    read_only = sum(r.read_only for r in rows)
    return {
        "requests": len(rows), "recall": whole / len(rows), "needed": needed, "recall_per_executor": met / needed,
        "read_only": read_only, "side_effects_offered": len(offers) / read_only if read_only else 0.0,
        "mean_pool": sum(len(pools[r.text]) for r in rows) / len(rows),
        "per_executor": {name: f"{a}/{b}" for name, (a, b) in sorted(per_executor.items())},
        "misses": misses, "offered": offers,
    }


def figures_by_split(rows: list[Written], pools: dict[str, list[str]], side_effecting: frozenset[str]) -> dict:
    """``written_figures`` of the whole set and of each split."""
    present = {r.split for r in rows}
    return {part: written_figures([r for r in rows if part == "all" or r.split == part], pools, side_effecting)
            for part in ("all", *(s for s in SPLITS if s in present))}


VARIANTS = (("ranking only (baseline)", "ranking"), ("shortlist", "shortlist"), ("shortlist, shapers alongside", "shaped"),
            ("shortlist and the learned offer", "learned"), ("shortlist, learned change reading", "gated"),
            ("whole catalogue when it fits", "catalogue"),
            ("whole catalogue, nothing withheld", "everything"))


def measure_written(index: PrefilterIndex, side_effecting: frozenset[str], pool: int,
                    rows: list[Written] | None = None) -> dict:
    rows = written_requests() if rows is None else rows
    report: dict = {}
    for label, variant in VARIANTS:
        pools = {r.text: offered(index, r.text, pool=pool, variant=variant) for r in rows}
        report[label] = figures_by_split(rows, pools, side_effecting)
    return report


def print_chat(index: PrefilterIndex, side_effecting: frozenset[str], pool: int, rows: list[Written], misses: str | None) -> dict:
    """What each variant offers to messages that need no executor: how often a side effect, and how many executors."""
    report = {}
    print(f"{CHAT_SET.relative_to(REPO)}: {len(rows)} messages that need no executor: side effects offered, "
          f"anything offered, mean offer")
    for label, variant in VARIANTS:
        pools = {r.text: offered(index, r.text, pool=pool, variant=variant) for r in rows}
        sides = [r for r in rows if set(pools[r.text]) & side_effecting]
        report[label] = {"side_effects_offered": len(sides) / len(rows),
                         "anything_offered": sum(bool(pools[r.text]) for r in rows) / len(rows),
                         "mean_pool": sum(len(pools[r.text]) for r in rows) / len(rows)}
        m = report[label]
        print(f"  {label:<36} {m['side_effects_offered']:>7.1%} {m['anything_offered']:>7.1%} {m['mean_pool']:>5.1f}")
        if misses:
            for r in sides:
                print(f"    [{label}] offers {', '.join(sorted(set(pools[r.text]) & side_effecting))}: {r.text}")
    return report


def model_intent(model: Path, rows: list[Written], index: PrefilterIndex, threads: int) -> tuple[dict[str, tuple[str, ...]], dict]:
    """The executors the intent extractor names for each request, asked of ``model`` as a turn asks it
    (the catalogue's executors, builtins left out, and its grammar held by the embedded server);
    with the median seconds a request and how many replies could not be read."""
    from metnos.mechanisms.llm.embedded import EmbeddedServer
    from metnos.mechanisms.llm.provider import make_provider
    from metnos.runtime.turn.intent_model import extract_intent
    from metnos.settings.llm_tiers import TierConfig

    builtins = set(builtin_tools())
    executors = [(e.name, e.summary) for e in index.entries if e.name not in builtins]
    found: dict[str, tuple[str, ...]] = {}
    seconds: list[float] = []
    problems = 0
    with EmbeddedServer(model, threads=threads) as server:
        provider = make_provider(TierConfig(provider="embedded", model=model.stem, max_tokens=64), embedded_url=server.url)

        def ask(tier: str, messages: list, tools: list, constraint: object = None) -> object:
            return provider.complete(messages, tools, constraint=constraint)

        try:
            for n, r in enumerate(rows, 1):
                start = time.perf_counter()
                got = extract_intent(lambda cls, **fields: None, ask, tier="middle", request_text=r.text, executors=executors)
                seconds.append(time.perf_counter() - start)
                found[r.text] = got.tools
                problems += got.problem is not None
                if n % 50 == 0:
                    print(f"  intent: {n}/{len(rows)} requests, median {statistics.median(seconds):.2f} s", file=sys.stderr)
        finally:
            provider.close()
    return found, {"model": model.name, "median_s": statistics.median(seconds), "unreadable": problems}


def with_intent(index: PrefilterIndex, rows: list[Written], intent: dict[str, tuple[str, ...]], side_effecting: frozenset[str],
                pool: int) -> dict:
    """The shortlist and the shaped offer with the executors the intent extractor named, as a turn makes them."""
    report: dict = {}
    for label, variant in (("shortlist + the model's intent", "shortlist"), ("shaped + the model's intent", "shaped")):
        pools = {r.text: [c["name"] for c in complete(index.query(r.text, pool_size=pool).to_json(), index, r.text,
                                                      intent.get(r.text, ()), offer=variant, pool_size=pool)["candidates"]]
                 for r in rows}
        report[label] = figures_by_split(rows, pools, side_effecting)
    report["the model's intent alone"] = figures_by_split(rows, {k: list(v) for k, v in intent.items()}, side_effecting)
    return report


def prompt_tokens(model: Path, rows: list[Written], pool: int) -> dict:
    """Each request's first prompt (system prompt, request, tools in the first round's form) in tokens,
    for the shortlist and for the whole catalogue when it fits, on the real turn catalogue."""
    import statistics

    from bench._turns import fresh_workspace
    from bench.prompt_tokens import GGUFTokenizer, render
    from metnos.mechanisms.llm.embedded import chat_template_path
    from metnos.mechanisms.llm.openai_compat import encode_tool
    from metnos.runtime.booted import Runtime
    from metnos.runtime.turn.prompt import PLANNER_PROMPT
    from metnos.runtime.turn.session import turn_catalogue

    tokenizer = GGUFTokenizer(model)
    template = chat_template_path().read_text(encoding="utf-8")
    root = fresh_workspace("metnos-bench-shortlist-")
    try:
        with Runtime.boot(birth=False) as rt:
            cat = turn_catalogue(rt)
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)

    def size(text: str, names: list[str]) -> int:
        messages = [{"role": "system", "content": PLANNER_PROMPT}, {"role": "user", "content": text}]
        tools = [encode_tool(t) for t in cat.tools(names, with_scratchpad=False, step_refs=False)]
        return tokenizer.count(render(template, messages, tools))

    out: dict = {"limit": FIRST_PROMPT_LIMIT}
    everything = [*cat.executors, *cat.builtins]
    out["every tool of the catalogue"] = size("what time is it", everything)
    out["every executor"] = size("what time is it", list(cat.executors))
    out["every executor without side effects"] = size("what time is it",
                                                      [n for n, te in cat.executors.items() if not te.entry.side_effects])
    for variant in OFFERS:
        sizes = [size(r.text, offered(cat.index, r.text, pool=pool, variant=variant)) for r in rows]
        out[variant] = {"median": statistics.median(sizes), "max": max(sizes),
                        "over_limit": sum(s > FIRST_PROMPT_LIMIT for s in sizes) / len(sizes)}
    return out


def print_written(report: dict, misses: str | None, source: Path = REQUEST_SET) -> None:
    print(f"{source.relative_to(REPO)}: recall per request (per needed executor), side effects offered to "
          f"read-only requests, mean pool; by split")
    print(f"  {'variant':<36} {'part':<9} {'recall':>7} {'(per exec.)':>11} {'side eff.':>10} {'pool':>5}")
    for label, parts in report.items():
        for part, m in parts.items():
            print(f"  {label:<36} {part:<9} {m['recall']:>7.1%} {m['recall_per_executor']:>11.1%} "
                  f"{m['side_effects_offered']:>10.1%} {m['mean_pool']:>5.1f}")
    short, whole = report["shortlist"]["all"], report["whole catalogue when it fits"]["all"]
    print(f"  whole catalogue when it fits against the shortlist: recall x{whole['recall'] / short['recall']:.2f} "
          f"({short['recall']:.1%} -> {whole['recall']:.1%}), side effects offered "
          f"{short['side_effects_offered']:.1%} -> {whole['side_effects_offered']:.1%}")
    for label in ("shortlist", "shortlist, shapers alongside", "shortlist and the learned offer", "whole catalogue when it fits"):
        print(f"  {label}, per executor: " + ", ".join(f"{k} {v}" for k, v in report[label]["all"]["per_executor"].items()))
    if misses:
        for label in ("shortlist", "shortlist and the learned offer", "whole catalogue when it fits"):
            if misses not in report[label]:
                continue
            m = report[label][misses]
            for miss in m["misses"]:
                print(f"    [{label}] misses {', '.join(miss['missing'])}: {miss['text']}")
            for o in m["offered"]:
                print(f"    [{label}] offers {', '.join(o['side_effects'])}: {o['text']}")


def catalogue() -> list[CatalogueEntry]:
    entries = [catalogue_entry(load_manifest(p)) for p in sorted((REPO / "executors").glob("*/manifest.toml"))]
    return entries + [b.entry for b in builtin_tools().values()]


# What each task of bench/agent_suite.py needs, judged here (the suite gives each
# task a check, not its plan): the executors of the shortest sensible plan, and
# whether the task asks for a change. A task missing here is reported, not guessed.
R_, W_ = "read_files", "write_files"
AGENT_NEEDS: dict[str, tuple[tuple[str, ...], bool]] = {
    "diary_last_lines": ((R_,), False), "todo_first_item": ((R_,), False),
    "csv_total": ((R_, "compute_entries"), False), "largest_document": (("find_files", "sort_entries"), False),
    "count_photos": (("find_files",), False), "list_notes": (("find_files",), False), "today_date": (("get_now",), False),
    "my_location": (("get_location",), False),
    "error_lines": ((R_, "filter_entries"), False), "page_special": (("get_urls",), False),
    "api_temperature": (("get_urls",), False), "package_version": ((R_,), False), "recipe_eggs": ((R_,), False),
    "find_invoices": (("find_files",), False), "contact_email": ((R_,), False), "backup_status": (("get_urls",), False),
    "passport_where": (("find_files",), False), "news_headline": (("get_urls",), False),
    "delete_tmp": (("find_files", "delete_files"), True), "send_late": (("send_messages",), True),
    "weekly_reminder": (("schedule_recurring",), True), "daily_reminder": (("schedule_recurring",), True),
    "save_note": ((W_,), True), "append_shopping": ((W_,), True), "rename_draft": (("move_files",), True),
    "delete_iso": (("delete_files",), True), "move_photos_by_date": (("find_files", "move_files"), True),
    "dinner_total_to_marco": ((R_, "compute_entries", "send_messages"), True),
    "delete_largest_download": (("find_files", "sort_entries", "delete_files"), True),
    "archive_txt_notes": (("find_files", "move_files"), True), "save_page": (("get_urls", W_), True),
    "temperature_to_anna": (("get_urls", "send_messages"), True), "todo_to_elena": ((R_, "send_messages"), True),
    "newest_note": (("find_files", "sort_entries"), False), "average_minutes": ((R_, "compute_entries"), False),
    "priciest_item": ((R_, "sort_entries"), False), "diary_last_to_file": ((R_, W_), True),
    "delete_tmp_recursive": (("find_files", "delete_files"), True), "desktop_photos": (("find_files", "move_files"), True),
    "pdfs_to_folder": (("find_files", "move_files"), True), "music_total_size": (("find_files", "compute_entries"), False),
    "headline_to_marco": (("get_urls", "send_messages"), True), "count_logins": ((R_, "filter_entries"), False),
    "three_largest_videos": (("find_files", "sort_entries"), False),
    "total_to_file": ((R_, "compute_entries", W_), True),
    "delete_tmp_and_tell": (("find_files", "delete_files", "send_messages"), True),
    "appointment_to_paolo": ((R_, "send_messages"), True), "meeting_weekly": (("schedule_recurring",), True),
    "largest_pdf_to_marco": (("find_files", "sort_entries", "send_messages"), True),
}


def agent_suite_requests() -> tuple[tuple[Request, ...], list[str]]:
    """The agent benchmark's tasks with what they need, and the ids of those not judged here."""
    try:
        from bench.agent_suite import TASKS
    except ImportError:
        return (), []
    found, unjudged = [], []
    for task in TASKS:
        judged = AGENT_NEEDS.get(task.id)
        if judged is None:
            unjudged.append(task.id)
            continue
        found.append(Request(task.request("http://127.0.0.1:8000"), frozenset(judged[0]), judged[1]))
    return tuple(found), unjudged


def measure(requests: tuple[Request, ...], pools: dict[str, list[str]], side_effecting: frozenset[str]) -> dict:
    complete = [r for r in requests if r.needs <= set(pools[r.text])]
    read_only = [r for r in requests if not r.changes]
    offered = [r for r in read_only if side_effecting & set(pools[r.text])]
    return {
        "requests": len(requests),
        "recall": len(complete) / len(requests),
        "read_only": len(read_only),
        "side_effects_offered": len(offered) / len(read_only) if read_only else 0.0,
        "mean_pool": sum(len(pools[r.text]) for r in requests) / len(requests),
        "misses": [{"text": r.text, "missing": sorted(r.needs - set(pools[r.text]))} for r in requests if r not in complete],
        "offered": [{"text": r.text, "side_effects": sorted(side_effecting & set(pools[r.text]))} for r in offered],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=DEFAULT_POOL_SIZE)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--misses", nargs="?", const="dev", choices=("dev", "held_out", "blind", "blind2", "blind3", "blind4", "blind5", "blind6", "blind7", "blind8", "blind9", "all"),
                        help="print the requests each variant misses (of the written set: this part, dev by default)")
    parser.add_argument("--tokens", type=Path, metavar="MODEL.gguf",
                        help="size each written request's first prompt with this model's tokenizer")
    parser.add_argument("--intent", type=Path, metavar="MODEL.gguf",
                        help="put each written request to the intent extractor on this model (served embedded)")
    parser.add_argument("--threads", type=int, default=2, help="the embedded model's threads (--intent)")
    parser.add_argument("--limit", type=int, help="only the first N written requests of each split (--intent)")
    args = parser.parse_args(argv)

    entries = catalogue()
    index = PrefilterIndex(entries)
    side_effecting = frozenset(e.name for e in entries if e.side_effects)
    report = {"catalogue": len(entries), "pool_size": args.pool, "sets": {}}
    agent_requests, unjudged = agent_suite_requests()
    if unjudged:
        print(f"bench/agent_suite.py: {len(unjudged)} tasks with no judged needs, left out: {', '.join(unjudged)}")
    for label, requests in (("bench/shortlist_recall.py", REQUESTS), ("bench/agent_suite.py", agent_requests)):
        if not requests:
            continue
        ranked = {r.text: [c.name for c in index.query(r.text, pool_size=args.pool).candidates] for r in requests}
        listed = {r.text: [c["name"] for c in shortlist(index, r.text, pool_size=args.pool)["candidates"]] for r in requests}
        whole = {r.text: offered(index, r.text, pool=args.pool, variant="catalogue") for r in requests}
        report["sets"][label] = {"ranking only (baseline)": measure(requests, ranked, side_effecting),
                                 "shortlist": measure(requests, listed, side_effecting),
                                 "whole catalogue when it fits": measure(requests, whole, side_effecting)}
    for label, variants in report["sets"].items():
        print(f"{label}: {next(iter(variants.values()))['requests']} requests, catalogue of {len(entries)}, pool {args.pool}")
        print(f"  {'variant':<26} {'recall':>8} {'side effects offered':>22} {'mean pool':>10}")
        for name, m in variants.items():
            print(f"  {name:<26} {m['recall']:>8.1%} {m['side_effects_offered']:>22.1%} {m['mean_pool']:>10.1f}")
        base, now = variants["ranking only (baseline)"], variants["shortlist"]
        print(f"  recall x{now['recall'] / base['recall']:.2f} against the baseline; side effects offered "
              f"{base['side_effects_offered']:.1%} -> {now['side_effects_offered']:.1%}")
        if args.misses:
            for name, m in variants.items():
                for miss in m["misses"]:
                    print(f"    [{name}] misses {', '.join(miss['missing'])}: {miss['text']}")
                for o in m["offered"]:
                    print(f"    [{name}] offers {', '.join(o['side_effects'])}: {o['text']}")
    rows = written_requests()
    if args.limit:
        rows = [r for part in SPLITS for r in [w for w in rows if w.split == part][:args.limit]]
    report["written"] = measure_written(index, side_effecting, args.pool, rows)
    if args.intent:
        intent, how = model_intent(args.intent, rows, index, args.threads)
        report["intent"] = how
        report["written"].update(with_intent(index, rows, intent, side_effecting, args.pool))
        print(f"intent extractor on {how['model']}: median {how['median_s']:.2f} s a request, {how['unreadable']} replies unreadable")
    print_written(report["written"], args.misses)
    for blind in BLIND_SETS if not args.limit else ():
        part = written_requests(blind)
        report[part[0].split] = measure_written(index, side_effecting, args.pool, part)
        print_written(report[part[0].split], args.misses, blind)
    if CHAT_SET.exists() and not args.limit:
        report["chat"] = print_chat(index, side_effecting, args.pool, written_requests(CHAT_SET), args.misses)
    if args.tokens:
        tokens = report["first_prompt_tokens"] = prompt_tokens(args.tokens, rows, args.pool)
        print(f"first prompt in tokens ({args.tokens.name}; limit {tokens['limit']}): every tool of the catalogue "
              f"{tokens['every tool of the catalogue']}, every executor {tokens['every executor']}, every executor "
              f"without side effects {tokens['every executor without side effects']} (request: what time is it)")
        for variant in OFFERS:
            t = tokens[variant]
            print(f"  {variant:<10} median {t['median']:.0f}, max {t['max']}, over the limit {t['over_limit']:.1%}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
