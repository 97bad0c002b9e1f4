"""The first prompt of a turn: how many tokens, and how much of it llama.cpp's cache reuses.

    python bench/first_prompt.py --model PATH.gguf       # or METNOS_EMBEDDED_MODEL
    python bench/first_prompt.py --url http://127.0.0.1:8080

Boots a fresh workspace with the seed catalogue, runs the first round of a
turn for each request below through the real loop (pre-filter, shortlist,
tools, messages) with a port that captures what would go to the model, and
renders each first prompt with the server's own chat template
(``/apply-template``) and tokenizer (``/tokenize``): its size, and how many of
its tokens it shares with the previous request's prompt (what llama.cpp's
prompt cache reuses when asks come one after another). With ``--timed N`` it
then evaluates N prompts in a row with the cache off (the baseline, every
token evaluated) and on, and prints the prompt times and their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from bench._turns import fresh_workspace  # noqa: E402
from metnos.mechanisms.llm.messages import LLMReply  # noqa: E402
from tests.support.turn_ports import InProcessPorts  # noqa: E402

REQUESTS = (
    "what time is it",
    "read ~/notes/diary.md and tell me the last three lines",
    "how many markdown files are in ~/docs",
    "add up the amount column of ~/bank/march.csv",
    "which is the biggest file in ~/Downloads",
    "move the photos in ~/camera into folders by month",
    "delete the .tmp files in ~/work",
    "fetch https://example.org and tell me its title",
    "remind me every monday at 9 to water the plants",
    "send a message to anna saying I am late",
    "write a shopping list with milk and eggs to ~/list.txt",
    "sort the lines of ~/names.txt",
)


class CapturePorts(InProcessPorts):
    caller = "bench"

    def __init__(self, runtime) -> None:
        super().__init__(runtime)
        self.captured = None

    def ask_llm(self, tier, messages, tools, *, tool_choice="auto", constraint=None):
        self.captured = (list(messages), list(tools))
        return LLMReply(text="done", tool_calls=(), call_form="none", raw={})


def first_prompts(requests):
    from bench._turns import turn_loop
    from metnos.runtime.booted import Runtime
    from metnos.runtime.turn.loop import TurnRequest

    env = dict(os.environ)
    out = []
    with Runtime.boot(birth=False) as rt:
        for text in requests:
            ports = CapturePorts(rt)
            turn_loop(rt, ports, env).run(TurnRequest(text=text))
            out.append((text, *ports.captured))
    return out


def render(client: httpx.Client, url: str, messages, tools) -> list[int]:
    """The prompt's tokens, as the server's own template and tokenizer make them."""
    from metnos.mechanisms.llm.openai_compat import OpenAICompatProvider

    body = OpenAICompatProvider(url=url, model="embedded", timeout_s=300).build_request(messages, tools)
    r = client.post(f"{url}/apply-template", json={"messages": body["messages"], "tools": body.get("tools", [])})
    r.raise_for_status()
    r = client.post(f"{url}/tokenize", json={"content": r.json()["prompt"]})
    r.raise_for_status()
    return list(r.json()["tokens"])


def evaluate(client: httpx.Client, url: str, messages, tools, *, cache: bool) -> dict:
    from metnos.mechanisms.llm.openai_compat import OpenAICompatProvider

    body = OpenAICompatProvider(url=url, model="embedded", timeout_s=300).build_request(messages, tools, max_tokens=1)
    body["cache_prompt"] = cache
    r = client.post(f"{url}/v1/chat/completions", json=body)
    r.raise_for_status()
    timings = r.json().get("timings") or {}
    return {"evaluated": timings.get("prompt_n"), "cached": timings.get("cache_n"), "ms": timings.get("prompt_ms") or 0}


def worst_case(client: httpx.Client, url: str, prompts) -> tuple[int, int]:
    from metnos.runtime.booted import Runtime
    from metnos.runtime.turn.session import turn_catalogue
    from metnos.settings import load_turn_settings

    pool = load_turn_settings(dict(os.environ)).pool_size
    _, messages, _ = prompts[0]
    with Runtime.boot(birth=False) as rt:
        catalogue = turn_catalogue(rt)
        names = [*catalogue.executors, *catalogue.builtins]
        alone = {n: len(render(client, url, messages, catalogue.tools([n], with_scratchpad=False, step_refs=False)))
                 for n in names}
        largest = sorted(names, key=lambda n: -alone[n])[:pool]
        return len(render(client, url, messages, catalogue.tools(largest, with_scratchpad=False, step_refs=False))), pool


def shared_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=os.environ.get("METNOS_EMBEDDED_MODEL"))
    parser.add_argument("--url", default=None, help="a running llama.cpp server (/apply-template, /tokenize) instead")
    parser.add_argument("--limit", type=int, default=600)
    parser.add_argument("--timed", type=int, default=4, help="how many prompts to evaluate for the timings (0: none)")
    args = parser.parse_args()
    root = fresh_workspace("metnos-bench-prompt-")
    server = None
    try:
        prompts = first_prompts(REQUESTS)
        url = args.url
        if url is None:
            from metnos.mechanisms.llm.embedded import EmbeddedServer

            if not args.model:
                sys.exit("give --model PATH.gguf (or METNOS_EMBEDDED_MODEL), or --url of a running server")
            server = EmbeddedServer(Path(args.model), log_path=root / "llm.log")
            url = server.start()
        with httpx.Client(timeout=900, trust_env=False) as client:
            tokens = [render(client, url, m, t) for _, m, t in prompts]
            # One turn after another, as asks come: llama.cpp keeps the last
            # prompt and reuses the prefix the next one shares with it.
            reused = [0] + [shared_prefix(a, b) for a, b in zip(tokens, tokens[1:])]
            print(f"{'request':<58} {'tokens':>6} {'reused':>6}  tools")
            for (text, _, tools), toks, hit in zip(prompts, tokens, reused):
                print(f"{text[:58]:<58} {len(toks):>6} {hit:>6}  {len(tools)}")
            sizes = [len(t) for t in tokens]
            share = statistics.median(h / len(t) for h, t in zip(reused[1:], tokens[1:]))
            print(f"first prompt: median {statistics.median(sizes):.0f} tokens, max {max(sizes)} (limit {args.limit})"
                  f"{'' if max(sizes) <= args.limit else '  OVER THE LIMIT'}; median share reused from the previous turn's prompt {share:.0%}")
            # The bound: the pool's worth of the largest tools the catalogue has.
            worst = worst_case(client, url, prompts)
            print(f"worst case: the {worst[1]} largest tools of the catalogue (the pool size) make {worst[0]} tokens"
                  f"{'' if worst[0] <= args.limit else '  OVER THE LIMIT'}")
            if args.timed:
                picked = prompts[: args.timed + 1]
                cold = [evaluate(client, url, m, t, cache=False) for _, m, t in picked][1:]
                warm = [evaluate(client, url, m, t, cache=True) for _, m, t in picked][1:]
                cold_ms = statistics.median(c["ms"] for c in cold)
                warm_ms = statistics.median(w["ms"] for w in warm)
                print(f"prompt evaluation over {len(cold)} turns: without the cache median {cold_ms:.0f} ms, "
                      f"with it {warm_ms:.0f} ms (ratio {cold_ms / max(warm_ms, 1e-9):.1f}x; "
                      f"cached tokens {[w['cached'] for w in warm]})")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
