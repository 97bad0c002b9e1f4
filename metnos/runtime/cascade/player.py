"""Following a plan in the loop's place of the model: its calls one by one, then its answer."""

from __future__ import annotations

from typing import Any

from domain.cascade.template import render
from metnos.mechanisms.llm.messages import LLMReply, ToolCall


class PlanPlayer:
    def __init__(self, plan: dict[str, Any], entry: str | None) -> None:
        self.plan = plan
        self.entry = entry

    def reply(self, steps_done: int) -> LLMReply | None:
        """The next call as the model would have made it, or None once every step ran."""
        if steps_done >= len(self.plan["steps"]):
            return None
        step = self.plan["steps"][steps_done]
        call = ToolCall(id=f"plan-{steps_done + 1}", name=step["executor"], arguments=dict(step["args"]))
        return LLMReply(text="", tool_calls=(call,), call_form="native", raw={})

    def answer(self, outputs: dict[int, Any], segments: list[dict[str, Any]] | None = None) -> str:
        """The answer template (or ``segments``, the same with its fillers written) filled from this
        run's outputs (TemplateGap when one lacks a value)."""
        return render(self.plan["answer"] if segments is None else segments, outputs)
