"""A planner round's reply held to a grammar: one valid call, or an answer in words.

The turn loop builds, each round, the JSON Schema of the calls it would accept
(metnos.runtime.turn.call_schema). ``CallConstraint`` turns it into a grammar in
the form Metnos's chat template asks the model to write (chat_template.jinja):
either one fenced block

    ```json
    {"name": ..., "arguments": {...}}
    ```

whose JSON the schema admits, or a plain answer (it does not open with a fence,
a brace, a bracket or a tag, and holds no ``{{`` placeholder). llama.cpp's
server masks every token that would leave that grammar.

The grammar is written for llguidance (``%llguidance``), which the embedded
server is built with: it embeds the JSON Schema as it is (``%json``), so no
schema-to-grammar converter of our own stands between the schema the loop
validates against and the tokens the server allows. A llama.cpp server built
without llguidance refuses it with HTTP 400, and the provider falls back.

llama.cpp refuses a custom grammar beside ``tools`` unless ``tool_choice`` is
"none"; the tools are still rendered into the prompt (the same prompt as an
unconstrained round: the prompt cache holds), and the server then returns the
text for us to read (``read_reply``) instead of parsing calls itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

import jsonschema

from domain.canonical import canonical_hash
from metnos.mechanisms.llm.messages import ToolCall

GRAMMAR_FORM = "llguidance"

_FENCE_OPEN = "```json\n"
_FENCE_CLOSE = "\n```"
# An answer opens with none of what starts a call (fence, brace, bracket, tag) nor
# with blank space, and never writes a {{...}} placeholder.
ANSWER_PATTERN = r"[^`{\[<\s]([^{]|\{[^{])*\{?"
_ANSWER_TERMINAL = f"/{ANSWER_PATTERN}/"


class _Recorded:
    """What both forms put on a reply's record: which grammar, and whether the server took it."""

    def grammar(self) -> str:
        raise NotImplementedError

    @property
    def digest(self) -> str:
        return canonical_hash({"form": GRAMMAR_FORM, "grammar": self.grammar()})

    def record(self, *, sent: bool, why_not: str | None = None) -> dict[str, Any]:
        found: dict[str, Any] = {"form": GRAMMAR_FORM, "digest": self.digest, "sent": sent}
        if why_not is not None:
            found["why_not"] = why_not
        return found


@dataclass(frozen=True)
class CallConstraint(_Recorded):
    """What one planner round may reply. ``call_schema`` None: words only (no call)."""

    call_schema: dict[str, Any] | None

    def grammar(self) -> str:
        lines = ["%llguidance {}"]
        if self.call_schema is None:
            lines.append("start: answer")
        else:
            # The schema keeps its order: the name is written before the arguments.
            lines += ["start: call | answer",
                      f"call: {json.dumps(_FENCE_OPEN)} call_json {json.dumps(_FENCE_CLOSE)}",
                      "call_json: %json " + json.dumps(self.call_schema, ensure_ascii=False)]
        lines += ["answer: ANSWER", f"ANSWER: {_ANSWER_TERMINAL}"]
        return "\n".join(lines) + "\n"

    def read_reply(self, text: str, *, call_id: str, cut_off: bool) -> ToolCall | None:
        """The call in a reply written under the grammar, or None for an answer.

        The server enforced the grammar, so a fenced block is the call; it is
        validated again all the same (a reply cut off by the token limit is a
        call whose arguments could not be read, which the loop sends back for
        one correction).
        """
        body = text.strip()
        if self.call_schema is None or not body.startswith(_FENCE_OPEN.strip()):
            return None
        inner = body[len(_FENCE_OPEN.strip()):]
        inner = inner[:-3] if inner.endswith("```") else inner
        name = "?"
        try:
            data = json.loads(inner)
        except ValueError as e:
            why = "the reply was cut off by the token limit" if cut_off else f"the call is not valid JSON ({e})"
            return ToolCall(id=call_id, name=name, arguments={}, arguments_error=f"{why}: {inner[:200]}")
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            name = data["name"]
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(self.call_schema).iter_errors(data))
        if error is not None:
            return ToolCall(id=call_id, name=name, arguments={}, arguments_error=f"the call does not fit the offered tools: {error.message}")
        return ToolCall(id=call_id, name=name, arguments=dict(data["arguments"]))


@dataclass(frozen=True)
class JsonConstraint(_Recorded):
    """A reply that is one JSON value of ``schema`` and nothing else (the online mode's plan)."""

    schema: dict[str, Any]

    def grammar(self) -> str:
        return "%llguidance {}\nstart: reply_json\nreply_json: %json " + json.dumps(self.schema, ensure_ascii=False) + "\n"

    def read_reply(self, text: str, *, call_id: str, cut_off: bool) -> ToolCall | None:
        """Never a call: the text is the reply, read by whoever asked for it."""
        return None


Constraint = Union[CallConstraint, JsonConstraint]
