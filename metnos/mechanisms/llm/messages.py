"""A provider-neutral conversation and the reply an LLM gives to it.

The turn loop builds a list of messages (system, user, assistant with tool
calls, tool results) and offers tools (``ToolSpec``, the executor's JSON
Schema as-is); each provider translates both into its own wire format and
translates the answer back into an ``LLMReply``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Union

CallForm = Literal["native", "text-json", "none"]
CALL_FORMS: tuple[str, ...] = ("native", "text-json", "none")


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: the name, what it does, its argument schema."""

    name: str
    description: str
    parameters: dict[str, Any]
    # What a round's grammar holds a call to, when it says more than the prompt's ``parameters``
    # (the bounds of numbers and lengths the prompt leaves out to save tokens); never sent.
    grammar_parameters: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def constrained_parameters(self) -> dict[str, Any]:
        return self.grammar_parameters if self.grammar_parameters is not None else self.parameters


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for. ``arguments_error`` says why its arguments
    could not be read (not JSON, not an object): the call is then kept, with
    empty arguments, so the loop can send the error back for one correction
    instead of losing the whole reply."""

    id: str
    name: str
    arguments: dict[str, Any]
    arguments_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.arguments_error is not None:
            d["arguments_error"] = self.arguments_error
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        error = data.get("arguments_error")
        return cls(id=str(data["id"]), name=str(data["name"]), arguments=dict(data["arguments"]),
                   arguments_error=str(error) if error is not None else None)


@dataclass(frozen=True)
class SystemMessage:
    text: str


@dataclass(frozen=True)
class UserMessage:
    text: str


@dataclass(frozen=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    """What one tool call gave back. ``content`` is what the model reads (JSON text, usually)."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


Message = Union[SystemMessage, UserMessage, AssistantMessage, ToolResult]


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass(frozen=True)
class LLMReply:
    """One answer from a model.

    ``call_form`` says how the tool calls came: ``native`` (the API's own
    tool-call field), ``text-json`` (a JSON call written in the message text,
    accepted strictly, see ``textcalls``) or ``none`` (a plain text answer).
    ``raw`` is the provider's whole JSON reply, so that it can be recorded as
    an event and the same reply parsed again on replay.
    """

    text: str
    tool_calls: tuple[ToolCall, ...]
    call_form: CallForm
    raw: dict[str, Any]
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stop_reason: str | None = None
    # The grammar the call was asked under and whether it reached the server
    # (metnos.mechanisms.llm.constraint); None when none was asked, as in every
    # reply recorded before constrained calls, which therefore replay unchanged.
    constraint: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.call_form not in CALL_FORMS:
            raise ValueError(f"call_form must be one of {CALL_FORMS}, not {self.call_form!r}")
        if (self.call_form == "none") != (not self.tool_calls):
            raise ValueError("call_form 'none' if and only if there are no tool calls")

    @property
    def is_final(self) -> bool:
        """No tool to call: the text is the answer (seeds/002 ch. 6)."""
        return not self.tool_calls

    def to_message(self) -> AssistantMessage:
        """The assistant turn to append to the conversation before the tool results."""
        # A text-json call goes back as a native call: the model then sees its
        # own call in the form the template (or API) renders for calls.
        text = "" if self.call_form == "text-json" else self.text
        return AssistantMessage(text=text, tool_calls=self.tool_calls)

    def to_record(self) -> dict[str, Any]:
        """A plain dict (JSON-ready) to store in an event."""
        record = {
            "text": self.text,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "call_form": self.call_form,
            "raw": self.raw,
            "usage": self.usage.to_dict(),
            "model": self.model,
            "stop_reason": self.stop_reason,
        }
        if self.constraint is not None:
            record["constraint"] = self.constraint
        return record

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> LLMReply:
        usage = data.get("usage") or {}
        return cls(
            text=str(data.get("text", "")),
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls", [])),
            call_form=data.get("call_form", "none"),
            raw=dict(data.get("raw") or {}),
            usage=Usage(usage.get("input_tokens"), usage.get("output_tokens")),
            model=str(data.get("model", "")),
            stop_reason=data.get("stop_reason"),
            constraint=dict(data["constraint"]) if isinstance(data.get("constraint"), dict) else None,
        )
