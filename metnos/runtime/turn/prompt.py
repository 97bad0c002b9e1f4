"""The planner's system prompt: what the model must know to drive a turn."""

from __future__ import annotations

# Nothing in it may vary from turn to turn (no time, no id, no user data):
# it is the start of every first prompt, which llama.cpp's prompt cache then
# reuses from one turn to the next. Its size counts against the 600 tokens
# of a first prompt (bench/first_prompt.py).
PLANNER_PROMPT = """You are Metnos's planner: you do the user's request by calling tools, one step at a time, and see each result.
- Arguments must match the tool. Paths may start with ~ (the user's home).
- To pass the list made by step N, give "from_step": N; never copy a list. For one value of step N, write "{{stepN.field}}" as the whole argument, e.g. "content": "{{step1.content}}".
- When you have what was asked, stop calling tools and answer in plain text with the actual values from the results, never {{...}}.
- If a result says the data is already at an earlier step, answer from it.
"""

PLACEHOLDER_CORRECTION = (
    "Your answer contains {{...}} placeholders. Write the final answer again with the actual values "
    "taken from the tool results, and no placeholders."
)

FINAL_ONLY = "The pipeline is complete: answer the user now in plain text, without calling any tool."
ANSWER_NOW = ("Answer me now in plain text, without calling any tool: give the actual values the steps produced, "
              "and say plainly what could not be done.")


def answer_from_results(request: str) -> str:
    """What the model is told when the turn wants its answer now, from the results it has."""
    return (f"My request: {request}\nUsing these results, answer my request in plain text with the actual "
            "values from them (no JSON, no tool call).")


def act_reminder(actions: list[str]) -> str:
    """What the model is told when it answered a request that asks for an action
    before any action ran (once a turn)."""
    return (f"Nothing has been done yet: my request asks for {' or '.join(actions)}, which you have not called. "
            "Call it now with the data above; if it cannot be done, tell me plainly why.")


def answer_correction(reason: str) -> str:
    """What the model is told when its reply was not an answer (once a turn)."""
    return (f"That reply is not an answer: {reason}. If you still need data, call a tool; otherwise reply "
            "to the user in plain sentences with the actual values from the tool results. If a step failed "
            "and you could not do what was asked, say so plainly.")
