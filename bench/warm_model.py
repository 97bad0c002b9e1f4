"""What a command pays to reach the embedded model: its own server, or the shared warm one.

    python bench/warm_model.py --model PATH.gguf [--rounds 3]

In interleaved rounds, the time from "I need the model" to the first reply
of one short request (max_tokens 1):

  old    start a server, ask, stop it: what each ``metnos ask`` did;
  new    find the shared server through the state file and ask it: what a
         command does once one is warm (metnos.mechanisms.llm.shared_server).

The shared server is started once before the rounds, in a throwaway runtime
dir, and stopped at the end. Prints medians and the ratio old/new.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from metnos.mechanisms.llm import shared_server  # noqa: E402
from metnos.mechanisms.llm.embedded import EmbeddedServer  # noqa: E402

BODY = {"messages": [{"role": "user", "content": "Say yes."}], "max_tokens": 1, "temperature": 0}


def ask(url: str) -> None:
    r = httpx.post(f"{url}/v1/chat/completions", json=BODY, timeout=600, trust_env=False)
    r.raise_for_status()


def old_way(model: Path, log: Path) -> float:
    started = time.perf_counter()
    server = EmbeddedServer(model, log_path=log)
    try:
        ask(server.start())
    finally:
        server.stop()
    return time.perf_counter() - started


def new_way(runtime_dir: Path, model: Path) -> float:
    started = time.perf_counter()
    url = shared_server.find_running(runtime_dir, model)
    assert url is not None, "the shared server is gone"
    ask(url)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=os.environ.get("METNOS_EMBEDDED_MODEL"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not args.model:
        sys.exit("give --model PATH.gguf (or METNOS_EMBEDDED_MODEL)")
    model = Path(args.model)
    runtime_dir = Path(tempfile.mkdtemp(prefix="metnos-bench-warm-"))
    try:
        shared_server.start_shared(runtime_dir, model, idle_s=600)
        old, new = [], []
        for _ in range(args.rounds):
            old.append(old_way(model, runtime_dir / "old.log"))
            new.append(new_way(runtime_dir, model))
        o, n = statistics.median(old), statistics.median(new)
        print(f"load average {os.getloadavg()[0]:.1f}, {args.rounds} rounds, model {model.name}")
        print(f"  old (own server each command) {o * 1000:7.0f} ms   new (shared warm server) {n * 1000:7.0f} ms"
              f"   ratio {o / n:5.1f}x")
    finally:
        shared_server.stop_announced(runtime_dir)
        shutil.rmtree(runtime_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
