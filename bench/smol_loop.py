"""The third column of the agent benchmark: smolagents' ToolCallingAgent with the same nine plain tools.

Optional: ``pip install 'metnos[bench]'`` brings smolagents; without it this
column is reported as not measured.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from bench.plain_loop import MAX_STEPS, LoopResult


def smolagents_available() -> bool:
    return importlib.util.find_spec("smolagents") is not None and importlib.util.find_spec("openai") is not None


def run_smolagents(base_url: str, model: str, request: str, tools: dict[str, Callable[..., Any]], *,
                   timeout_s: float = 300.0, max_tokens: int = 512) -> LoopResult:
    import logging

    from smolagents import LogLevel, OpenAIServerModel, ToolCallingAgent, tool

    logging.getLogger("httpx").setLevel(logging.WARNING)
    llm = OpenAIServerModel(model_id=model, api_base=base_url.rstrip("/") + "/v1", api_key="not-needed",
                            client_kwargs={"timeout": timeout_s, "max_retries": 0}, temperature=0.0, max_tokens=max_tokens)
    agent = ToolCallingAgent(tools=[tool(fn) for fn in tools.values()], model=llm, max_steps=MAX_STEPS, verbosity_level=LogLevel.OFF)
    try:
        answer = agent.run(request)
        error = None
    except Exception as e:  # noqa: BLE001 - any failure of the framework is a failed task, with its reason
        answer, error = "", f"{type(e).__name__}: {e}"
    steps = sum(len(getattr(s, "tool_calls", None) or []) for s in agent.memory.steps)
    steps -= sum(1 for s in agent.memory.steps for c in (getattr(s, "tool_calls", None) or []) if c.name == "final_answer")
    counts = agent.monitor.get_total_token_counts()
    calls = sum(1 for s in agent.memory.steps if getattr(s, "model_output_message", None) is not None)
    return LoopResult("" if answer is None else str(answer), steps, int(getattr(counts, "input_tokens", 0) or 0), calls, error)
