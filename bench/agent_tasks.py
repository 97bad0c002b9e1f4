"""Agent benchmark: everyday requests on a small local model, Metnos against plain tool-calling loops.

    PYTHONPATH=$PWD python3 bench/agent_tasks.py --model ~/.local/share/metnos/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
        --json bench-0.5b.json                     # the whole suite, every system
    ... --slice                                    # a handful of tasks (CI)
    ... --only csv_total,7 --systems metnos,plain  # some tasks (ids or 1-based numbers), some systems
    ... --systems metnos,metnos-online,metnos-hybrid --online-model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
                                                   # the modes (docs/modes.md): a second server plays the online model

One llama.cpp server (xllamacpp, as Metnos's embedded model runs it) is started
on the GGUF and shared by every system, one system after the other. Each task
gets a fresh fake home in the default layout (HOME is the fake home, no
METNOS_HOME, XDG defaults) built from the task's files; a local web server on
127.0.0.1 serves the pages the requests fetch. Metnos runs as a user would run
it: ``metnos init`` once per home (not timed), then ``metnos ask --json --yes``
(timed, boot included), pointed at the shared server by its config.toml. Its
steps and prompt tokens are read back from its own log. A task passes when its
machine check holds on the answer and on what was left behind.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.agent_suite import PAGES, SLICE, TASKS, Outcome, Task, build_home, search_reply  # noqa: E402
from bench.plain_loop import LoopResult, run_plain_loop  # noqa: E402
from bench.plain_tools import make_tools, plain_outbox, plain_schedules  # noqa: E402
from bench.smol_loop import run_smolagents, smolagents_available  # noqa: E402

SYSTEMS = ("metnos", "metnos-online", "metnos-hybrid", "plain", "smolagents")
# Metnos's modes (docs/modes.md): the [runtime] each system's config.toml gets.
MODE_OF = {"metnos": "local", "metnos-online": "online", "metnos-hybrid": "hybrid"}


@dataclass
class TaskRun:
    task: str
    system: str
    passed: bool
    why: str
    seconds: float
    steps: int
    prompt_tokens: int
    status: str
    answer: str
    model_calls: int = 0
    # Metnos only: its calls refused for their form (unreadable, unknown tool, off schema, bad piping),
    # its answers sent back as no answer, and its model rounds asked under a grammar the server took.
    malformed_calls: int = 0
    answers_rejected: int = 0
    constrained_rounds: int = 0


# The local web server the fetching tasks talk to.

class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/search?"):
            query = parse_qs(urlsplit(self.path).query).get("q", [""])[0]
            page: tuple[str, bytes] | None = ("application/json", search_reply(query))
        else:
            page = PAGES.get(self.path)
        if page is None:
            self.send_error(404)
            return
        kind, body = page
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


def start_pages() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


# Metnos, as a user runs it.

def metnos_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METNOS_", "XDG_"))}
    env.update(HOME=str(home), PYTHONPATH=str(REPO))
    return env


# Whether Metnos's planner calls are held to the round's grammar (--unconstrained: off, for the comparison).
CONSTRAINED_CALLS = True
# Settings every home's config.toml gets (--config): a variant of Metnos measured against its default.
# The homes take no METNOS_* variable from the bench's own environment, so this is how a setting reaches them.
EXTRA_CONFIG = ""


def point_metnos_at(home: Path, llm_url: str, timeout_s: float, *, mode: str = "local", online_url: str | None = None,
                    pages_url: str | None = None, world: Any = None, settings: str = "") -> None:
    """The shared server as the user's config.toml names it, with the bench's time limit per request
    (the plain loops have no limit per request either, only the task's). In online and hybrid
    mode the frontier tier is ``online_url`` (the second model) and plans; local tiers stay on ``llm_url``.
    The pages' host is on the network allow-list, as a user who asks Metnos to fetch from it
    would have put it."""
    config = home / ".config" / "metnos" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    text = (f'[llm.tiers.fast]\nprovider = "openai"\nurl = "{llm_url}"\nmodel = "bench"\n'
            f"timeout_s = {timeout_s:.0f}\nmax_tokens = 512\n" + ("" if CONSTRAINED_CALLS else "constrained = false\n"))
    if mode != "local":
        text += (f'\n[llm.tiers.frontier]\nprovider = "openai"\nurl = "{online_url or llm_url}"\nmodel = "bench-online"\n'
                 f'timeout_s = {timeout_s:.0f}\nmax_tokens = 1024\n\n[runtime]\nmode = "{mode}"\nonline_tier = "frontier"\n')
    allow = [pages_url.split("://", 1)[1].rstrip("/")] if pages_url else []
    # A task's world (mail, calendar): its servers on the allow-list and its sources, as the user would have set them.
    allow += world.allow() if world is not None else []
    if allow:
        text += f"\n[network]\nallow = {json.dumps(allow)}\n"
    if pages_url:
        # The same server stands in for a SearXNG instance (find_urls' web search).
        text += f'\n[web]\nsearch_url = "{pages_url.rstrip("/")}"\n'
    if world is not None:
        text += world.config()
    if settings:
        # What the task's user has set (get_location's [location]).
        text += "\n" + settings
    if EXTRA_CONFIG:
        text += "\n" + EXTRA_CONFIG + "\n"
    config.write_text(text, encoding="utf-8")


def _metnos(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "metnos", *args], env=env, cwd=env["HOME"], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _events(env: dict[str, str], topic: str) -> list[dict[str, Any]]:
    proc = _metnos(["events", "--json", "--topic", topic], env, 120)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip().startswith("{")]


# The StepRejected kinds of a call refused for its form, before anything about what it would do.
MALFORMED_KINDS = frozenset({"arguments", "unknown_executor", "schema", "piping"})


def run_metnos(home: Path, request: str, llm_url: str, timeout_s: float, *, mode: str = "local",
               online_url: str | None = None, pages_url: str | None = None,
               world: Any = None, settings: str = "") -> tuple[LoopResult, str, Outcome, float, dict[str, int]]:
    env = metnos_env(home)
    init = _metnos(["init"], env, 300)
    if init.returncode != 0:
        raise RuntimeError(f"metnos init failed: {init.stderr.strip()[-300:]}")
    point_metnos_at(home, llm_url, timeout_s, mode=mode, online_url=online_url, pages_url=pages_url, world=world, settings=settings)
    if world is not None:
        world.prepare(env)
    t0 = time.monotonic()
    try:
        proc = _metnos(["ask", "--json", "--yes", request], env, timeout_s)
        out = next((json.loads(ln) for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
        status = (out or {}).get("status") or f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
        answer = (out or {}).get("answer") or ""
        error = None if status == "answered" else status
    except subprocess.TimeoutExpired:
        answer, status, error = "", "timeout", "timeout"
    seconds = time.monotonic() - t0
    steps = len(_events(env, "Turn.StepProposed"))
    replies = _events(env, "Turn.LLMReplied")
    tokens = sum(int(((e["state"].get("reply") or {}).get("usage") or {}).get("input_tokens") or 0) for e in replies)
    schedules = [e["state"] for e in _events(env, "Schedule.ScheduleCreated") if e["state"].get("owner") != "builtin"]
    outbox_dir = home / ".local" / "share" / "metnos" / "outbox"
    outbox = [json.loads(p.read_text()) for p in sorted(outbox_dir.glob("*.json"))] if outbox_dir.is_dir() else []
    forms = {
        "malformed_calls": sum(e["state"].get("kind") in MALFORMED_KINDS for e in _events(env, "Turn.StepRejected")),
        "answers_rejected": len(_events(env, "Turn.AnswerRejected")),
        "constrained_rounds": sum(bool(((e["state"].get("reply") or {}).get("constraint") or {}).get("sent")) for e in replies),
    }
    # What the task's world holds after the turn (mail that arrived, the calendar's events), for its check.
    seen = (world.outcome() if hasattr(world, "outcome") else {"mail_sent": world.sent()}) if world is not None else {}
    return LoopResult(answer, steps, tokens, len(replies), error), status, Outcome(answer, home, outbox, schedules, **seen), seconds, forms


def run_in_process(system: str, home: Path, request: str, llm_url: str, timeout_s: float) -> tuple[LoopResult, str, Outcome, float]:
    tools = make_tools(home)
    runner = run_plain_loop if system == "plain" else run_smolagents
    t0 = time.monotonic()
    r = runner(llm_url, "bench", request, tools, timeout_s=timeout_s)
    seconds = time.monotonic() - t0
    status = "answered" if r.error is None else r.error
    return r, status, Outcome(r.answer, home, plain_outbox(home), plain_schedules(home)), seconds


def world_of(name: str) -> Any:
    """The context manager that starts a task's world; imported when a task needs it (each starts real servers)."""
    if name == "mail":
        from bench.mail_world import mail_world

        return mail_world
    if name == "calendar":
        from bench.calendar_world import calendar_world

        return calendar_world
    raise ValueError(f"agent_tasks: no world {name!r} (known: mail, calendar)")


def run_task(system: str, task: Task, pages_url: str, llm_url: str, timeout_s: float, online_url: str | None = None,
             keep: bool = False) -> TaskRun:
    home = Path(tempfile.mkdtemp(prefix=f"agentbench-{task.id}-{system}-"))
    try:
        build_home(task, home)
        request = task.request(pages_url)
        if system in MODE_OF and task.world and not task.world.startswith("mcp:"):
            with world_of(task.world)() as world:
                result, status, outcome, seconds, forms = run_metnos(home, request, llm_url, timeout_s, mode=MODE_OF[system],
                                                                     online_url=online_url, pages_url=pages_url, world=world,
                                                                     settings=task.settings)
        elif system in MODE_OF and task.world.startswith("mcp:"):
            # Deferred: only the MCP tasks add servers to the home.
            from bench.mcp_world import mcp_world

            with mcp_world(task.world, home) as world:
                result, status, outcome, seconds, forms = run_metnos(home, request, llm_url, timeout_s, mode=MODE_OF[system],
                                                                     online_url=online_url, pages_url=pages_url, world=world)
        elif system in MODE_OF:
            result, status, outcome, seconds, forms = run_metnos(home, request, llm_url, timeout_s, mode=MODE_OF[system],
                                                                 online_url=online_url, pages_url=pages_url, settings=task.settings)
        else:
            result, status, outcome, seconds = run_in_process(system, home, request, llm_url, timeout_s)
            forms = {}
        passed, why = task.check(outcome)
        return TaskRun(task.id, system, passed, why, round(seconds, 2), result.steps, result.prompt_tokens, status, outcome.answer[:400],
                       result.llm_calls, **forms)
    except Exception as e:  # noqa: BLE001 - a crash of the harness for one task is that task's failure, said
        return TaskRun(task.id, system, False, f"bench error: {type(e).__name__}: {e}", 0.0, 0, 0, "bench-error", "")
    finally:
        if keep:
            print(f"kept {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)


# Summary and output.

def p90(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def summarize(runs: list[TaskRun]) -> dict[str, Any]:
    secs = [r.seconds for r in runs]
    return {
        "tasks": len(runs),
        "passed": sum(r.passed for r in runs),
        "pass_rate": round(sum(r.passed for r in runs) / len(runs), 3) if runs else 0.0,
        # Of the runs that said they answered, how many the checker finds right: what "answered" is worth.
        "answered": len(answered := [r for r in runs if r.status == "answered"]),
        "wrong_answered": sum(not r.passed for r in answered),
        "answered_precision": round(sum(r.passed for r in answered) / len(answered), 3) if answered else 0.0,
        "median_s": round(statistics.median(secs), 2) if secs else 0.0,
        "p90_s": round(p90(secs), 2),
        "median_steps": statistics.median([r.steps for r in runs]) if runs else 0,
        "median_prompt_tokens": statistics.median([r.prompt_tokens for r in runs]) if runs else 0,
        "total_prompt_tokens": sum(r.prompt_tokens for r in runs),
        "median_model_calls": statistics.median([r.model_calls for r in runs]) if runs else 0,
        "total_model_calls": sum(r.model_calls for r in runs),
        "malformed_calls": sum(r.malformed_calls for r in runs),
        "answers_rejected": sum(r.answers_rejected for r in runs),
        "constrained_rounds": sum(r.constrained_rounds for r in runs),
    }


def print_table(summary: dict[str, dict[str, Any]], runs: list[TaskRun], tasks: list[Task]) -> None:
    systems = list(summary)
    print()
    print(f"{'task':<26}" + "".join(f"{s:>14}" for s in systems))
    by = {(r.task, r.system): r for r in runs}
    for t in tasks:
        cells = []
        for s in systems:
            r = by.get((t.id, s))
            cells.append(f"{('pass' if r.passed else 'FAIL') + f' {r.seconds:5.1f}s':>14}" if r else f"{'-':>14}")
        print(f"{t.id:<26}" + "".join(cells))
    print()
    rows = [("passed", lambda m: f"{m['passed']}/{m['tasks']}"), ("pass rate", lambda m: f"{100 * m['pass_rate']:.0f}%"),
            ("answered", lambda m: f"{m.get('answered', '-')}"), ("wrong answered", lambda m: f"{m.get('wrong_answered', '-')}"),
            ("answered precision", lambda m: f"{100 * m.get('answered_precision', 0):.0f}%"),
            ("median s/task", lambda m: f"{m['median_s']:.1f}"), ("p90 s/task", lambda m: f"{m['p90_s']:.1f}"),
            ("median steps", lambda m: f"{m['median_steps']}"), ("median prompt tok", lambda m: f"{m['median_prompt_tokens']:.0f}"),
            ("total prompt tok", lambda m: f"{m['total_prompt_tokens']}"),
            ("median model calls", lambda m: f"{m.get('median_model_calls', '-')}"),
            ("malformed calls", lambda m: f"{m.get('malformed_calls', '-')}"), ("answers rejected", lambda m: f"{m.get('answers_rejected', '-')}"),
            ("constrained rounds", lambda m: f"{m.get('constrained_rounds', '-')}")]
    print(f"{'':<26}" + "".join(f"{s:>14}" for s in systems))
    for label, fmt in rows:
        print(f"{label:<26}" + "".join(f"{fmt(summary[s]):>14}" for s in systems))
    if "metnos" in summary and "plain" in summary and summary["plain"]["median_s"]:
        ratio = summary["metnos"]["median_s"] / summary["plain"]["median_s"]
        print(f"\nmetnos median time / plain loop median time: {ratio:.2f}x")


def markdown(report: dict[str, Any]) -> str:
    """The summary of a saved report as a Markdown table, for docs/benchmarks.md."""
    systems = report["systems"]
    rows = [("tasks run", lambda m: f"{m['tasks']}"), ("passed", lambda m: f"{m['passed']} ({100 * m['pass_rate']:.0f}%)"),
            ("answered, of them wrong", lambda m: f"{m.get('answered', '-')}, {m.get('wrong_answered', '-')}"),
            ("precision of answered", lambda m: f"{100 * m.get('answered_precision', 0):.1f}%"),
            ("median s/task", lambda m: f"{m['median_s']:.1f}"), ("p90 s/task", lambda m: f"{m['p90_s']:.1f}"),
            ("median steps", lambda m: f"{m['median_steps']}"), ("median prompt tokens", lambda m: f"{m['median_prompt_tokens']:.0f}"),
            ("median model calls", lambda m: f"{m.get('median_model_calls', '-')}"),
            ("model calls in all", lambda m: f"{m.get('total_model_calls', '-')}"),
            ("calls refused for their form", lambda m: f"{m.get('malformed_calls', '-')}"),
            ("answers sent back", lambda m: f"{m.get('answers_rejected', '-')}"),
            ("rounds under a grammar", lambda m: f"{m.get('constrained_rounds', '-')}")]
    lines = ["| " + report["model_file"] + " | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    for label, fmt in rows:
        lines.append(f"| {label} | " + " | ".join(fmt(report["summary"][s]) for s in systems) + " |")
    return "\n".join(lines)


def pick_tasks(only: str | None, use_slice: bool) -> list[Task]:
    if use_slice:
        return [t for t in TASKS if t.id in SLICE]
    if not only:
        return list(TASKS)
    chosen = []
    for item in only.split(","):
        item = item.strip()
        if item.isdigit():
            chosen.append(TASKS[int(item) - 1])
        else:
            match = [t for t in TASKS if t.id == item]
            if not match:
                raise SystemExit(f"agent_tasks: no task {item!r}")
            chosen.extend(match)
    return chosen


def write_report(path: Path, meta: dict[str, Any], systems: list[str], runs: list[TaskRun], started: float,
                 load: list[float], *, complete: bool) -> None:
    report = {
        **meta, "complete": complete, "wall_s": round(time.time() - started, 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_1m_per_task": load},
        "summary": {s: summarize([r for r in runs if r.system == s]) for s in systems},
        "runs": [asdict(r) for r in runs],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".partial")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)


def default_model(choice: Path | None = None) -> Path:
    """The GGUF of --model: a file, or a choice as `metnos model` takes it (a size such as 1.5b, a name in
    the models folder); none: the installed embedded model."""
    from metnos.mechanisms.llm.model_files import resolve_model
    from metnos.settings.workspace import Workspace

    if choice is not None and choice.is_file():
        return choice
    return resolve_model(Workspace.from_env().models_dir, str(choice) if choice is not None else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, help="a GGUF file (default: the installed embedded model)")
    ap.add_argument("--url", help="use this running OpenAI-compatible server for Metnos instead of starting one")
    ap.add_argument("--baseline-url", help="use this running server for the plain loops (default: Metnos's server, "
                    "or with --baseline-template builtin one started on the same GGUF with the model's own template)")
    ap.add_argument("--baseline-template", choices=("builtin", "metnos"), default="metnos",
                    help="the chat template of the baselines' server: Metnos's (default: the same server as Metnos, as "
                         "the issue defines the baseline) or the model's own (what a user of a stock llama.cpp server gets)")
    ap.add_argument("--keep", action="store_true", help="keep each task's fake home (its log included) for a look afterwards")
    ap.add_argument("--online-model", type=Path, help="a GGUF for the online model of metnos-online and metnos-hybrid "
                    "(a second server; default: the same server as the local model)")
    ap.add_argument("--systems", default="metnos,plain,smolagents", help=f"comma list of {', '.join(SYSTEMS)}")
    ap.add_argument("--only", help="comma list of task ids or 1-based numbers")
    ap.add_argument("--slice", action="store_true", help=f"only the CI slice ({len(SLICE)} tasks)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a task may take before it fails (default 300)")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (default: its choice)")
    ap.add_argument("--shuffle", type=int, metavar="SEED", help="run the tasks in a random order (a run cut short is still a fair sample)")
    ap.add_argument("--unconstrained", action="store_true", help="Metnos's planner calls without the round's grammar (for the comparison)")
    ap.add_argument("--config", default="", metavar="TOML",
                    help='TOML added to every home\'s config.toml, e.g. \'[turn]\\noffer = "catalogue"\' (a variant against the default)')
    ap.add_argument("--list", action="store_true", help="list the tasks and exit")
    ap.add_argument("--markdown", type=Path, metavar="JSON", help="print a saved report's summary as a Markdown table and exit")
    args = ap.parse_args(argv)
    global CONSTRAINED_CALLS, EXTRA_CONFIG
    CONSTRAINED_CALLS = not args.unconstrained
    EXTRA_CONFIG = args.config.replace("\\n", "\n")
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0

    tasks = pick_tasks(args.only, args.slice)
    if args.shuffle is not None:
        import random

        random.Random(args.shuffle).shuffle(tasks)
    if args.list:
        for i, t in enumerate(TASKS, 1):
            print(f"{i:>3} {t.id:<26} {t.tools} tool(s)  {t.text}")
        return 0
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"agent_tasks: unknown systems {unknown} (known: {', '.join(SYSTEMS)})")
    notes: list[str] = []
    if "smolagents" in systems and not smolagents_available():
        systems.remove("smolagents")
        notes.append("smolagents not measured: not installed (pip install 'metnos[bench]')")
        print(notes[-1], file=sys.stderr)

    server = baseline_server = None
    model = args.model
    if args.url:
        llm_url = args.url.rstrip("/")
    else:
        from metnos.mechanisms.llm.embedded import EmbeddedServer

        model = default_model(model)
        log = Path(tempfile.gettempdir()) / "agentbench-llm.log"
        server = EmbeddedServer(model, threads=args.threads or None, log_path=log)
        t0 = time.monotonic()
        llm_url = server.start()
        print(f"model server for {model.name} at {llm_url}, up in {time.monotonic() - t0:.1f} s (log {log})", file=sys.stderr)
    # By default the baselines share Metnos's server (and so its chat template); with
    # --baseline-template builtin they get the model's own, as on a stock llama.cpp server.
    if args.baseline_url:
        baseline_url = args.baseline_url.rstrip("/")
    elif args.baseline_template == "metnos" or all(s in MODE_OF for s in systems):
        baseline_url = llm_url
    else:
        from metnos.mechanisms.llm.embedded import BUILTIN_TEMPLATE, EmbeddedServer

        model = default_model(model)
        log = Path(tempfile.gettempdir()) / "agentbench-baseline-llm.log"
        baseline_server = EmbeddedServer(model, threads=args.threads or None, log_path=log, chat_template=BUILTIN_TEMPLATE)
        baseline_url = baseline_server.start()
        print(f"baseline model server (the model's own template) at {baseline_url} (log {log})", file=sys.stderr)
    online_server, online_url = None, None
    if args.online_model and any(s in ("metnos-online", "metnos-hybrid") for s in systems):
        from metnos.mechanisms.llm.embedded import EmbeddedServer

        online_log = Path(tempfile.gettempdir()) / "agentbench-online-llm.log"
        online_server = EmbeddedServer(args.online_model, threads=args.threads or None, log_path=online_log)
        online_url = online_server.start()
        print(f"online model server for {args.online_model.name} at {online_url}", file=sys.stderr)
    pages, pages_url = start_pages()
    runs: list[TaskRun] = []
    started = time.time()
    load = [round(os.getloadavg()[0], 2)]
    meta = {"model": str(model) if model else args.url, "model_file": model.name if model else None,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "threads": args.threads or None,
            "systems": systems, "tasks": [t.id for t in tasks], "notes": notes,
            "online_model": args.online_model.name if args.online_model else None,
            "baseline_template": "metnos" if baseline_url == llm_url else "builtin"}
    # Task by task, each system in turn: the load of a shared machine drifts, and a run
    # cut short still compares the systems on the same tasks.
    try:
        for n, task in enumerate(tasks, 1):
            for system in systems:
                r = run_task(system, task, pages_url, llm_url if system in MODE_OF else baseline_url, args.timeout, online_url, args.keep)
                runs.append(r)
                mark = "pass" if r.passed else "FAIL"
                print(f"[{n}/{len(tasks)} {system}] {task.id}: {mark} in {r.seconds:.1f} s, {r.steps} steps, "
                      f"{r.prompt_tokens} prompt tokens ({r.status}; {r.why})", file=sys.stderr, flush=True)
            load.append(round(os.getloadavg()[0], 2))
            if args.json:
                write_report(args.json, meta, systems, runs, started, load, complete=n == len(tasks))
    finally:
        pages.shutdown()
        for s in (server, baseline_server):
            if s is not None:
                s.stop()
        if online_server is not None:
            online_server.stop()

    print_table({s: summarize([r for r in runs if r.system == s]) for s in systems}, runs, tasks)
    if args.json:
        print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
