"""The LLM judge of the vaglio (seeds/002 ch. 9.2), beside the rule judge.

After the guard and the rule judge have let a call through, a model on the
middle tier is asked, in a context of its own (its system prompt, the
request and the one call; nothing of the proposer's conversation), how well
the call serves the request: a score in [0, 1] and a reason. Under
``[runtime.judge] threshold`` the step is refused, with the judge's reason as
the observation. It judges only what ``[runtime.judge]`` names: every call
with side effects, or only executors holding one of ``capabilities``
(``fs:write``, ``network``, ``env``, ``code:exec``, ``fs:read``) or named there.

Its call is recorded like any side call (metnos/runtime/turn/side_call.py: ``LLMAsked``
with role ``judge`` and what was sent, ``LLMReplied``) and its verdict as ``StepJudgedByModel``, so replay feeds the
recorded reply back and reaches the same verdict. A reply that is not a
verdict refuses the step: a judge that cannot be read has not approved.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from domain.turn import Turn
from metnos.mechanisms.llm.errors import LLMError
from metnos.settings.runtime import JudgeConfig
from metnos.runtime.turn.side_call import AskModel, Record, ask_side, reply_object
from metnos.runtime.step.vaglio import DENY, Verdict
from metnos.settings import i18n

JUDGE_PROMPT = i18n.texts().text("prompt.judge")  # the English catalogue, byte for byte

def _origins_line(origins: list[str] | tuple[str, ...]) -> str:
    """Where the call's targets came from, when content the user did not write chose them (said only then, so a
    call whose targets are the user's is asked as before)."""
    return f"\nWhere its targets came from: {'; '.join(origins)}" if origins else ""


def capabilities_of(loaded: Any) -> set[str]:
    """The capability names an executor holds, as config.toml spells them."""
    cap = loaded.manifest.capabilities
    held = {"fs:read": cap.fs_read, "fs:write": cap.fs_write, "network": cap.network, "code:exec": cap.code_exec, "env": cap.env}
    return {name for name, grant in held.items() if grant}


def read_verdict(text: str) -> tuple[float, str] | None:
    """(score, reason) from the judge's text; None when it is not a verdict."""
    data, _ = reply_object(text)
    score = data.get("score") if isinstance(data, dict) else None
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= score <= 1.0:
        return None
    reason = data.get("reason")
    return float(score), (reason.strip()[:500] if isinstance(reason, str) and reason.strip() else i18n.english("turn.judge.no_reason"))


def _habit(verdict: Verdict) -> str:
    """The vaglio's mnest hint, in words for the judge; nothing when there is none (as turns recorded before it)."""
    hint = verdict.mnest_hint
    if not hint:
        return ""
    return (f"\nFrom the user's history: after {hint['from']}, {verdict.executor} has followed {hint['uses']} times "
            "(a strong habit; a hint that the call fits what the user wants, not a proof).")


def _principal_line(verdict: Verdict) -> str:
    """Who the call works for, when it is a guest; nothing for the host (as turns recorded before actors)."""
    if verdict.principal == "host":
        return ""
    return (f"\nOn behalf of: {verdict.principal}, a guest of the household (not its owner): the call may only "
            "look, never act on the owner's things.")


def judge_message(request_text: str, name: str, args: dict[str, Any], verdict: Verdict,
                  origins: list[str] | tuple[str, ...] = ()) -> str:
    """What the judge is asked about one call: the request, the call, and, when they hold, the user's habit
    (a strong mnest's hint), where its targets came from and who it works for."""
    call = orjson.dumps({"tool": name, "arguments": args}, option=orjson.OPT_SORT_KEYS).decode()
    return f"User's request: {request_text}\nProposed call: {call}{_habit(verdict)}" + _origins_line(origins) + _principal_line(verdict)


class LLMJudge:
    def __init__(self, config: JudgeConfig, system_prompt: str = JUDGE_PROMPT) -> None:
        self.config = config
        self.system_prompt = system_prompt

    def applies(self, name: str, loaded: Any, *, side_effects: bool) -> bool:
        if not self.config.enabled:
            return False
        if not self.config.capabilities:
            return side_effects
        wanted = set(self.config.capabilities)
        return name in wanted or bool(capabilities_of(loaded) & wanted)

    def review(self, record: Record, ask_model: AskModel, *, round: int, step: int, request_text: str,  # noqa: A002
               name: str, args: dict[str, Any], verdict: Verdict, origins: list[str] | tuple[str, ...] = ()) -> Verdict:
        """Ask the model, record the call and the verdict; the rule verdict, or a refusal."""
        tier = self.config.tier
        reply = ask_side(record, ask_model, round=round, role="judge", tier=tier, system=self.system_prompt,
                         user=judge_message(request_text, name, args, verdict, origins))
        model = ""
        if isinstance(reply, LLMError):
            found, why = None, i18n.english("turn.judge.not_asked", error=reply)
        else:
            model = reply.model
            found = read_verdict(reply.text)
            why = i18n.english("turn.judge.not_a_verdict", reply=repr(reply.text[:200]))
        threshold = self.config.threshold
        if found is None:
            score, reason, decision = None, why, DENY
        else:
            score, reason = found
            decision = DENY if score < threshold else verdict.decision
        record(Turn.StepJudgedByModel, step=step, verdict={
            "executor": name, "score": score, "reason": reason, "threshold": threshold,
            "decision": decision, "tier": tier, "model": model})
        if decision != DENY:
            return verdict
        shown = (i18n.english("turn.judge.no_score") if score is None
                 else i18n.english("turn.judge.score_under", score=f"{score:.2f}", threshold=f"{threshold:.2f}"))
        return dataclasses.replace(verdict, decision=DENY, reason=i18n.english("turn.judge.refused", name=name, shown=shown, reason=reason),
                                   score=score, blocked_by="llm_judge", judge_kind="llm",
                                   rules=(*verdict.rules, "judge:llm"))
