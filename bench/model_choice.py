"""Which embedded model serves a user best on a laptop's CPU: the figures the default is chosen by.

    python bench/model_choice.py --model A.gguf --model B.gguf [--threads 2] \
        [--report A.gguf=agent-a.json --report B.gguf=agent-b.json] [--json out.json]

For each model, on its own freshly started embedded server (one at a time, so
they do not share the CPU):

  load s          from starting the server to its first /health answer;
  first token s   the time to the first token of a turn's first prompt with the
                  prompt cache off (the whole prompt evaluated, as on the first
                  ask after a start): the median over bench/first_prompt.py's
                  requests, each rendered by the real loop;
  peak memory     the server's peak resident set (VmHWM);
  download        the GGUF's size, what `metnos model install` fetches.

With ``--report MODEL=JSON`` (a saved bench/agent_tasks.py report for that
model), the table also holds the agent benchmark's pass rate, precision of
``answered``, median and p90 seconds a task, and calls refused for their form.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from bench._turns import fresh_workspace  # noqa: E402
from bench.first_prompt import REQUESTS, evaluate, first_prompts  # noqa: E402
from metnos.mechanisms.llm.embedded import EmbeddedServer  # noqa: E402


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(model: Path, prompts, threads: int | None) -> dict:
    log = Path(tempfile.mkstemp(prefix="metnos-model-choice-", suffix=".log")[1])
    server = EmbeddedServer(model, threads=threads, log_path=log)
    started = time.perf_counter()
    url = server.start()
    load_s = time.perf_counter() - started
    try:
        first_token = []
        with httpx.Client(timeout=600, trust_env=False) as client:
            for _text, messages, tools in prompts:
                asked = time.perf_counter()
                evaluate(client, url, messages, tools, cache=False)
                first_token.append(time.perf_counter() - asked)
        return {"model_file": model.name, "download_mb": round(model.stat().st_size / 2**20, 1), "load_s": round(load_s, 2),
                "first_token_s": round(statistics.median(first_token), 2), "first_token_max_s": round(max(first_token), 2),
                "peak_rss_mb": round(peak_rss_mb(server.pid), 1), "prompts": len(first_token), "threads": threads}
    finally:
        server.stop()
        log.unlink(missing_ok=True)


def with_report(row: dict, report_path: Path) -> dict:
    report = json.loads(report_path.read_text())
    summary = report["summary"]["metnos"]
    return {**row, "tasks": summary["tasks"], "pass_rate": summary["pass_rate"],
            "answered_precision": summary.get("answered_precision"), "median_s": summary["median_s"], "p90_s": summary["p90_s"],
            "malformed_calls": summary.get("malformed_calls"), "report_complete": report.get("complete")}


COLUMNS = (("model", "model_file", "{}"), ("pass", "pass_rate", "{:.0%}"), ("precision of answered", "answered_precision", "{:.1%}"),
           ("median s/task", "median_s", "{:.1f}"), ("p90 s/task", "p90_s", "{:.1f}"), ("malformed calls", "malformed_calls", "{}"),
           ("first token s", "first_token_s", "{:.2f}"), ("load s", "load_s", "{:.2f}"), ("peak memory MB", "peak_rss_mb", "{:.0f}"),
           ("download MB", "download_mb", "{:.0f}"))


def markdown(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(c[0] for c in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [fmt.format(row[key]) if row.get(key) is not None else "-" for _, key, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", required=True, help="a GGUF file (give one --model per model)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--report", action="append", default=[], help="MODEL=JSON: the agent benchmark's report for that model")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    reports = {Path(k).name: Path(v) for k, v in (r.split("=", 1) for r in args.report)}
    models = [Path(m).expanduser().resolve() for m in args.model]
    root = fresh_workspace("metnos-bench-model-choice-")
    try:
        prompts = first_prompts(REQUESTS)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    for model in models:
        row = measure(model, prompts, args.threads)
        if model.name in reports:
            row = with_report(row, reports[model.name])
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(markdown(rows))
    if len(rows) == 2:
        a, b = rows
        print(f"\n{b['model_file']} against {a['model_file']}: first token {b['first_token_s'] / a['first_token_s']:.2f}x, "
              f"peak memory {b['peak_rss_mb'] / a['peak_rss_mb']:.2f}x, download {b['download_mb'] / a['download_mb']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1))


if __name__ == "__main__":
    main()
