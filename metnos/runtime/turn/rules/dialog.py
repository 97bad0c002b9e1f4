"""The atomic dialog (seeds/002 ch. 4-ter and 11.2.2): the turn asks the user one question on its channel, waits, goes on.

Two ways in:

* A call with side effects that names no target (the shape's
  ``needs_action_target``): get_inputs asks "Which files should I delete?".
  The answer becomes the call's target argument (its ``StepResolved`` says
  ``completed[argument] = "user answer"``) and the call goes on through every
  check after the shape's, the vaglio and the user's approval included: an
  answer names a target, it never approves acting on it. A call whose target
  is no plain list or text (a list of messages to send) gets the answer back
  as its observation, for the model to call again with it.
* The planner's own dialog tools (get_inputs, request_location_from_user):
  the answer is the step's observation.

The question goes through the ports (``ask_user``): live, to the channel's
asker (a terminal prompt, the daemon's pending dialogs, the next Telegram
message); replayed, from the log. Each records a ``DialogAsked`` before the
wait and a ``DialogAnswered`` after it. A caller that offers no asker at all
(``can_ask`` false) records neither, and the turn ends ``needs_input`` as it
did before dialogs existed, so turns recorded then replay the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from domain.turn import Turn
from metnos.runtime.step.dialog_tools import DIALOG_TOOLS, GET_INPUTS, LOCATION_QUESTION, REQUEST_LOCATION, USER_ANSWER, Question
from metnos.runtime.step.shape import next_state
from metnos.runtime.turn.failures import FailureKind
from metnos.runtime.turn.rules.base import BaseRule, End, Settle, Step, Verdict
from metnos.settings import i18n

# Arguments that refer to earlier steps are never a target the user types.
_NOT_TARGETS = frozenset({"from_step", "with_step", "entries", "with_entries"})
_LIST_SEPARATORS = re.compile(r"\s*(?:,|;|\n)\s*")


@dataclass(frozen=True)
class Reply:
    answer: str | None
    by: str

    @property
    def answered(self) -> bool:
        return self.answer is not None and bool(self.answer.strip())


def can_ask(step: Step) -> bool:
    return bool(step.loop.ports.can_ask())


def ask(step: Step, question: Question) -> Reply:
    """Ask and wait (a stop signal may land in the wait); both ends recorded."""
    step.record(Turn.DialogAsked, step=question.step, channel=question.channel, tool=question.tool, question=question.question,
                executor=question.executor, argument=question.argument)
    with step.loop.interrupts.waiting_as(step.state, "while waiting for an answer"):
        answer, by = step.loop.ports.ask_user(question)
    answer = answer.strip() if isinstance(answer, str) else None
    reply = Reply(answer or None, by)
    if reply.answer is not None:
        step.state.user_answers.append(reply.answer)
    step.record(Turn.DialogAnswered, step=question.step, channel=question.channel, answered=reply.answered, answer=reply.answer, by=by)
    return reply


def unanswered(question: Question, reply: Reply) -> str:
    """Why the turn stops at an unanswered question, and how to go on."""
    if reply.by.endswith("timeout"):
        what = "timeout"
    elif reply.by.endswith("no-terminal"):
        what = "no_terminal"
    elif reply.by.endswith("stopped") or reply.by.endswith("stopping"):
        what = "stopped"
    else:
        what = "no_answer"
    why = i18n.english(f"turn.dialog.{what}", channel=question.channel, by=reply.by)
    return i18n.english("turn.dialog.unanswered", question=question.question, why=why)


def target_argument(schema: dict[str, Any]) -> tuple[str, str] | None:
    """The argument an answer fills, and how: ``("paths", "list")`` for a list of texts,
    ``("file", "text")`` for a text; the first of the schema's in its order that a person
    could type. None: the target is made of several fields (a message: recipient and body)."""
    schema = _referred(schema)
    for name, prop in (schema.get("properties") or {}).items():
        if name in _NOT_TARGETS or not isinstance(prop, dict):
            continue
        if prop.get("type") == "array" and isinstance(prop.get("items"), dict) and prop["items"].get("type") == "string":
            return name, "list"
    for name, prop in (schema.get("properties") or {}).items():
        if name not in _NOT_TARGETS and isinstance(prop, dict) and prop.get("type") == "string" and "enum" not in prop \
                and prop.get("format") == "path":
            return name, "text"
    return None


def _referred(schema: dict[str, Any]) -> dict[str, Any]:
    """An executor's input schema is a reference into its schema document (``#/definitions/Input``)."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = schema
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def as_value(answer: str, form: str) -> Any:
    if form == "list":
        return [part for part in _LIST_SEPARATORS.split(answer.strip()) if part]
    return answer.strip()


def ask_for_target(step: Step, action: Any, observation: dict[str, Any]) -> Verdict | None:
    """``needs_action_target``: ask for the target; None, the call goes on with it."""
    target = target_argument(step.te.loaded.input_schema)
    # The registry words it with the verb and the object of the call ("Which files should I delete?").
    words = str(action.prereq_args.get("question") or i18n.english("turn.question.what_target", name=step.name))
    question = Question(step=step.number, tool=GET_INPUTS, question=words, channel=step.request.channel, executor=step.name,
                        argument=target[0] if target else "")
    reply = ask(step, question)
    if not reply.answered:
        step.reject("shape", step.transition.to_json(), observation, action.to_json())
        return End(FailureKind.NEEDS_INPUTS, unanswered(question, reply), commit=True)
    assert reply.answer is not None
    if target is None:
        given = {**observation, "user_answer": reply.answer, "provenance": USER_ANSWER,
                 "hint": f"the user answered “{question.question}” with “{reply.answer}”: call {step.name} again with that as its target"}
        return step.reject("shape", step.transition.to_json(), given, action.to_json())
    name, form = target
    step.args = {**step.args, name: as_value(reply.answer, form)}
    step.completed = {**step.completed, name: USER_ANSWER}
    step.transition = next_state(step.transition.state, step.name, step.args)
    return None


def run_dialog_tool(step: Step) -> Verdict:
    """The planner called get_inputs or request_location_from_user: the answer is the step's observation."""
    channel = step.request.channel
    asked = str(step.args.get("question") or "").strip()
    if step.name == REQUEST_LOCATION:
        question = Question(step=step.number, tool=step.name, question=asked or LOCATION_QUESTION, channel=channel)
    else:
        question = Question(step=step.number, tool=step.name, question=asked, channel=channel)
    if not can_ask(step):
        return End(FailureKind.NEEDS_INPUTS, i18n.english("turn.dialog.nobody_to_ask", question=question.question, channel=channel), commit=True)
    reply = ask(step, question)
    if not reply.answered:
        return End(FailureKind.NEEDS_INPUTS, unanswered(question, reply), commit=True)
    observation: dict[str, Any] = {"ok": True, "question": question.question, "answer": reply.answer, "provenance": USER_ANSWER}
    if step.name == REQUEST_LOCATION:
        observation["location"] = {"name": reply.answer}
        observation["hint"] = ("use this location for the request; you may offer to keep it for next time: "
                               f"[location] name = \"{reply.answer}\" in config.toml")
    step.record(Turn.BuiltinCalled, step=step.number, name=step.name, observation=observation)
    step.record(Turn.ObservationRecorded, step=step.number, ok=True, observation=observation, spill={})
    step.state.observations[step.number] = observation
    step.state.went_well(observation)
    step.observation, step.ran, step.succeeded = observation, True, True
    step.state.guards = step.state.guards.record(step.number, step.name, step.args, executed=True, succeeded=True)
    return Settle(observation)


class Dialog(BaseRule):
    """get_inputs and request_location_from_user, run after the vaglio: asked of the user, not of a service."""
    name = "dialog"

    def on_resolved(self, step: Step) -> Verdict | None:
        if step.kind != "builtin" or step.name not in DIALOG_TOOLS:
            return None
        return run_dialog_tool(step)


__all__ = ["Dialog", "Reply", "ask", "ask_for_target", "can_ask", "run_dialog_tool", "target_argument"]
