"""Why a replayed turn parted from its record, said in terms a user can act on.

A divergence alone says "expected X, found Y". What a user needs is the
cause: an event missing from the log or out of order (the log was damaged
or edited), a model reply that no longer gives what the turn did (it was
edited), an executor whose files changed, a setting changed, another model.
Each cause is a dict with ``kind`` and a one-line ``message``; some carry a
``diff``. The checks read only the recorded events, the events the replay
produced and the context changes the replayer already found.
"""

from __future__ import annotations

import difflib
from typing import Any

import orjson

from domain.base import event_state
from domain.turn import decision_fields

# Events that the loop derives straight from the model's last reply.
_FROM_REPLY = frozenset({"StepProposed", "TurnAnswered", "StepRejected", "TurnFailed"})


def _name(event: Any) -> str:
    return type(event).__name__


def log_damage(recorded: list[Any]) -> list[dict[str, Any]]:
    """Gaps and disorder in the turn's own event numbers and times: the log itself was changed."""
    causes: list[dict[str, Any]] = []
    for before, after in zip(recorded, recorded[1:]):
        v0, v1 = before.originator_version, after.originator_version
        if v1 > v0 + 1:
            missing = ", ".join(str(v) for v in range(v0 + 1, v1))
            causes.append({
                "kind": "missing-event",
                "message": f"event {missing} of the turn is missing from the log, between {_name(before)} (event {v0}) and {_name(after)} (event {v1})",
            })
        elif v1 <= v0:
            causes.append({
                "kind": "out-of-order",
                "message": f"events out of order in the log: {_name(after)} (event {v1}) is stored after {_name(before)} (event {v0})",
            })
        elif after.timestamp < before.timestamp:
            causes.append({
                "kind": "out-of-order",
                "message": (f"events out of order in the log: {_name(after)} (event {v1}, {after.timestamp.isoformat()}) "
                            f"is dated before {_name(before)} (event {v0}, {before.timestamp.isoformat()})"),
            })
    return causes


def _state(event: Any) -> dict[str, Any]:

    return decision_fields(_name(event), event_state(event))


def _json_lines(value: Any) -> list[str]:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS, default=str).decode().splitlines()


def diff(recorded: Any, now: Any, *, was: str, is_: str) -> str:
    return "\n".join(difflib.unified_diff(_json_lines(recorded), _json_lines(now), was, is_, lineterm=""))


def _reply_the_turn_acted_on(reply: dict[str, Any], recorded_next: Any) -> dict[str, Any]:
    """The reply as the recorded turn read it: the call or the answer it acted on, put back in."""
    original = {"text": reply.get("text", ""), "tool_calls": [dict(c) for c in reply.get("tool_calls", [])]}
    state = _state(recorded_next)
    if _name(recorded_next) == "StepProposed":
        calls = original["tool_calls"]
        match = next((c for c in calls if c.get("id") == state.get("call_id")), calls[0] if calls else None)
        if match is None:
            calls.append({"id": state.get("call_id"), "name": state.get("executor"), "arguments": state.get("args")})
        else:
            match["name"], match["arguments"] = state.get("executor"), state.get("args")
    elif _name(recorded_next) == "TurnAnswered":
        original["text"] = state.get("text", "")
        original["tool_calls"] = []
    return original


def reply_causes(recorded: list[Any], produced: list[Any], position: int) -> list[dict[str, Any]]:
    """At a divergence right after a model reply: an edited reply, or another model's."""
    i = position - 1
    r = recorded[i] if i < len(recorded) else None
    p = produced[i] if i < len(produced) else None
    if r is None or p is None:
        return []
    if _name(r) == _name(p) == "LLMReplied":
        was, now = r.reply, p.reply
        causes = []
        if was.get("model") != now.get("model"):
            causes.append({"kind": "different-model",
                           "message": f"a different model: the turn was answered by {was.get('model')!r}, now by {now.get('model')!r}"})
        causes.append({
            "kind": "different-reply", "message": f"the model replies differently now at round {r.round}",
            "diff": diff({k: was.get(k) for k in ("text", "tool_calls")}, {k: now.get(k) for k in ("text", "tool_calls")},
                         was="recorded reply", is_="reply now"),
        })
        return causes
    if _name(r) not in _FROM_REPLY or i == 0 or _name(recorded[i - 1]) != "LLMReplied":
        return []
    reply_event = recorded[i - 1]
    acted_on = _reply_the_turn_acted_on(reply_event.reply, r)
    in_log = {"text": reply_event.reply.get("text", ""), "tool_calls": list(reply_event.reply.get("tool_calls", []))}
    if orjson.dumps(acted_on, option=orjson.OPT_SORT_KEYS) == orjson.dumps(in_log, option=orjson.OPT_SORT_KEYS):
        return []
    return [{
        "kind": "edited-reply",
        "message": (f"the model reply recorded at position {i} (round {reply_event.round}) is not the one the turn acted on: "
                    "it was edited in the log after the turn"),
        "diff": diff(acted_on, in_log, was="the reply the turn acted on", is_="the reply in the log now"),
    }]


def context_causes(changed: dict[str, Any], env_names: dict[str, str]) -> list[dict[str, Any]]:
    causes = []
    for name, values in (changed.get("settings") or {}).items():
        where = f" ({env_names[name]})" if name in env_names else ""
        causes.append({"kind": "setting-changed",
                       "message": f"setting {name}{where} changed: {values['recorded']!r} then, {values['now']!r} now"})
    for name, values in (changed.get("executors") or {}).items():
        files = values.get("files") or []
        if files:
            held = " (it no longer loads: see `metnos executors list`)" if values["now"] is None else ""
            for f in files:
                causes.append({"kind": "executor-changed",
                               "message": f"executor {name}: {f['file']} changed since the turn ({f['recorded']} then, {f['now']} now){held}"})
        elif values["now"] is None:
            causes.append({"kind": "executor-changed",
                           "message": f"executor {name} {values['recorded'][0]} is not available now (removed, quarantined, or changed and not verified again: see `metnos executors list`)"})
        elif values["recorded"] is None:
            causes.append({"kind": "executor-changed", "message": f"executor {name} {values['now'][0]} was not there when the turn ran"})
        else:
            causes.append({"kind": "executor-changed",
                           "message": f"executor {name} changed since the turn (version {values['recorded'][0]}, {values['recorded'][1]} then; version {values['now'][0]}, {values['now'][1]} now)"})
    if "runtime_version" in changed:
        v = changed["runtime_version"]
        causes.append({"kind": "runtime-changed", "message": f"Metnos itself changed: {v['recorded']} then, {v['now']} now"})
    return causes


def waived_approval_causes(recorded: list[Any], position: int) -> list[dict[str, Any]]:
    """A turn recorded when autonomy ``full`` answered the vaglio's question
    itself (``ApprovalWaived``): Metnos asks there now, so the replay parts
    at that step, and no edit of the log is to blame."""
    for event in recorded[max(position - 1, 0):]:
        if _name(event) == "ApprovalWaived":
            return [{"kind": "approval-now-asked",
                     "message": (f"step {event.step}: {event.executor} ran without a question because autonomy {event.autonomy} "
                                 "answered for the user when the turn ran; Metnos now asks there at every level (seeds/000: "
                                 "a side effect that is not idempotent asks even within Full), so the replay asks where the "
                                 "recorded turn did not")}]
    return []


def explain(recorded: list[Any], produced: list[Any], position: int, changed: dict[str, Any], env_names: dict[str, str]) -> list[dict[str, Any]]:
    return (log_damage(recorded) + reply_causes(recorded, produced, position) + waived_approval_causes(recorded, position)
            + context_causes(changed, env_names))
