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
from metnos.mechanisms.llm.anthropic import parse_anthropic_reply
from metnos.mechanisms.llm.openai_compat import parse_openai_reply

# Events that the loop derives straight from the model's last reply.
_FROM_REPLY = frozenset({"StepProposed", "TurnAnswered", "StepRejected", "TurnFailed"})


def _name(event: Any) -> str:
    return type(event).__name__


def log_damage(recorded: list[Any]) -> list[dict[str, Any]]:
    """Gaps and disorder in the turn's own event numbers and times: the log itself was changed.

    One cause a change: a run of missing events is one gap, two events stored in each other's
    place one swap, and an event moved elsewhere one move (the events left in order are the
    longest run of rising numbers; the others are the ones that moved).
    """
    versions = [e.originator_version for e in recorded]
    by_version = {e.originator_version: e for e in recorded}
    causes = _gaps(by_version) + _disorder(recorded, versions)
    if not causes:
        for before, after in zip(recorded, recorded[1:]):
            if after.timestamp < before.timestamp:
                v0, v1 = before.originator_version, after.originator_version
                causes.append({
                    "kind": "out-of-order",
                    "message": (f"events out of order in the log: {_name(after)} (event {v1}, {after.timestamp.isoformat()}) "
                                f"is dated before {_name(before)} (event {v0}, {before.timestamp.isoformat()})"),
                })
    return causes


def _gaps(by_version: dict[int, Any]) -> list[dict[str, Any]]:
    causes = []
    present = sorted(by_version)
    for low, high in zip(present, present[1:]):
        if high > low + 1:
            missing = ", ".join(str(v) for v in range(low + 1, high))
            causes.append({
                "kind": "missing-event",
                "message": (f"event {missing} of the turn is missing from the log, between {_name(by_version[low])} (event {low}) "
                            f"and {_name(by_version[high])} (event {high})"),
            })
    return causes


def _disorder(recorded: list[Any], versions: list[int]) -> list[dict[str, Any]]:
    in_order = sorted(range(len(versions)), key=lambda i: versions[i])
    displaced = [i for i, j in enumerate(in_order) if i != j]
    causes = []
    swapped: set[int] = set()
    for i in displaced:
        j = in_order[i]
        if i in swapped or in_order[j] != i or i > j:
            continue
        swapped |= {i, j}
        low, high = (recorded[i], recorded[j]) if versions[i] < versions[j] else (recorded[j], recorded[i])
        causes.append({
            "kind": "out-of-order",
            "message": (f"events out of order in the log: {_name(low)} (event {low.originator_version}) is stored after "
                        f"{_name(high)} (event {high.originator_version})"
                        + (", in each other's place" if abs(i - j) > 1 else "")),
        })
    kept = _rising(versions)
    for i in range(len(versions)):
        if i in swapped or i in kept:
            continue
        later = next((recorded[k] for k in range(i - 1, -1, -1) if versions[k] > versions[i]), None)
        where = (f"is stored after {_name(later)} (event {later.originator_version})" if later is not None
                 else f"is stored before {_name(recorded[i + 1])} (event {versions[i + 1]})")
        causes.append({"kind": "out-of-order",
                       "message": f"events out of order in the log: {_name(recorded[i])} (event {versions[i]}) {where}"})
    return causes


def _rising(values: list[int]) -> set[int]:
    """The indices of a longest strictly rising run (not necessarily contiguous) of ``values``."""
    best: list[list[int]] = []  # best[k]: indices of a rising run of length k + 1 ending lowest
    for i, v in enumerate(values):
        lo, hi = 0, len(best)
        while lo < hi:
            mid = (lo + hi) // 2
            if values[best[mid][-1]] < v:
                lo = mid + 1
            else:
                hi = mid
        run = (best[lo - 1] if lo else []) + [i]
        if lo == len(best):
            best.append(run)
        else:
            best[lo] = run
    return set(best[-1]) if best else set()


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


def edited_reply_in_agreement(recorded: list[Any]) -> tuple[int, dict[str, Any]] | None:
    """A reply edited in the log together with what the turn did after it (a consistent edit of
    several events replays the same path): the first reply whose text or calls are not what the
    server's own reply, recorded with it, says. Returns (its index, the cause), or None.

    Only replies read as the server sent them are checked (``native`` calls or none); calls
    written in the text are read with the tools offered, which the record does not hold whole.
    """
    for i, event in enumerate(recorded):
        if _name(event) != "LLMReplied":
            continue
        reply = event.reply
        raw = reply.get("raw")
        if not isinstance(raw, dict) or reply.get("call_form") not in ("native", "none"):
            continue
        try:
            sent = parse_openai_reply(raw) if "choices" in raw else parse_anthropic_reply(raw) if raw.get("type") == "message" else None
        except Exception:  # noqa: BLE001 - a raw reply that no longer parses is for the divergence to show, not this check
            continue
        if sent is None or sent.call_form not in ("native", "none"):
            continue
        said = {"text": sent.text, "tool_calls": [c.to_dict() for c in sent.tool_calls]}
        logged = {"text": reply.get("text", ""), "tool_calls": [dict(c) for c in reply.get("tool_calls", [])]}
        if orjson.dumps(said, option=orjson.OPT_SORT_KEYS) == orjson.dumps(logged, option=orjson.OPT_SORT_KEYS):
            continue
        return i, {
            "kind": "edited-reply",
            "message": (f"the model reply recorded at position {i + 1} (round {event.round}) is not what the model sent (the "
                        "server's reply is recorded with it): it was edited in the log after the turn, and the events after it "
                        "with it, so the replay follows the edit"),
            "diff": diff(said, logged, was="the reply the model sent", is_="the reply in the log now"),
        }
    return None


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
    damage = log_damage(recorded)
    # Where the turn's own events are missing or out of order, the replies the replay met in their
    # places are that damage's doing, not an edit of a reply: one cause, said once.
    replies = [] if damage else reply_causes(recorded, produced, position)
    return damage + replies + waived_approval_causes(recorded, position) + context_causes(changed, env_names)


LOG_DAMAGE = frozenset({"missing-event", "out-of-order"})
