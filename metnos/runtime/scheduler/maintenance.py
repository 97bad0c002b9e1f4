"""The mnestome's builtin jobs: its ager, and synt's suggestions for recurring wishes.

Both are functions of the log and the firing's date (never the wall clock):
the ager's changes are Mnest events committed with the firing; a suggestion
is a compose over the mnestome for each recurring proto-mnest (seeds/002
ch. 11.2, "synt_suggest": uses >= 3, weight >= 0.30), recorded as a
Synthesis event when it changed. No LLM is asked.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.application import AggregateNotFoundError

from domain.mnest import PROTO
from domain.synthesis import Synthesis, synthesis_id
from metnos.runtime.mnestome.ager import age
from metnos.runtime.mnestome.compose import compose
from metnos.runtime.jobs import CallbackContext, CallbackResult
from domain.proposal import Proposal
from metnos.runtime.synt.fusion import retire_fused
from metnos.runtime.synt.introspect import candidates
from metnos.runtime.synt.pipeline import run_id_of

RECURRING_USES = 3
RECURRING_WEIGHT = 0.30


def run_mnest_ager(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    runtime = ctx.runtime
    state = runtime.mnestome.catch_up(runtime.log)
    changed = age(runtime, ctx.now, state=state)
    events = sum(len(m.pending_events) for m in changed)
    return CallbackResult(ok=True, output={"ok": True, "mnests_changed": len(changed), "events": events}, aggregates=changed)


def run_synt_suggest(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    runtime = ctx.runtime
    state = runtime.mnestome.catch_up(runtime.log)
    names = {le.name for le in runtime.report.loaded}
    suggestions = []
    changed = []
    for m in sorted(state["mnests"].values(), key=lambda m: m["key"]):
        if m["state"] != PROTO or m["uses"] < args.get("min_uses", RECURRING_USES) or m["weight"] < args.get("min_weight", RECURRING_WEIGHT):
            continue
        found = compose(state, {"name": m["dst_executor"]}, start=m["src_executor"], catalogue=names)
        chain = found["chain"] if found else None
        outcome = "compose" if found else "generate"
        suggestions.append({"wanted": m["dst_executor"], "from": m["src_executor"], "chain": chain, "outcome": outcome})
        try:
            synthesis = runtime.log.repository.get(synthesis_id(m["dst_executor"]))
        except AggregateNotFoundError:
            synthesis = Synthesis.open(wanted=m["dst_executor"], at=ctx.now)
        if synthesis.suggest(source=m["src_executor"], uses=m["uses"], weight=m["weight"], outcome=outcome, chain=chain, at=ctx.now) or synthesis.version == 1:
            changed.append(synthesis)
    return CallbackResult(ok=True, output={"ok": True, "suggestions": suggestions}, aggregates=changed)


def run_synt_introspect(ctx: CallbackContext, args: dict[str, Any]) -> CallbackResult:
    """The introspective cascade: merge, generalise and specialise proposals, each with its
    evidence (metnos/runtime/synt/introspect.py), one per candidate never proposed before; and
    the fused executors no active mnest cites any more, archived."""

    runtime = ctx.runtime
    state = runtime.proposals.catch_up(runtime.log)
    proposed = {p["source"].get("key") for p in state["proposals"].values() if p["source"].get("kind") == "introspection"}
    opened = []
    for c in candidates(runtime, ctx.now):
        if c["key"] in proposed:
            continue
        pid = runtime.ids()
        opened.append(Proposal.open(id=pid, kind=c["strategy"], request=c["request"], run_id=run_id_of(pid), at=ctx.now,
                                    source={"kind": "introspection", "key": c["key"], "executors": c["executors"],
                                            "evidence": c["evidence"]}))
        proposed.add(c["key"])
    retired = retire_fused(runtime, ctx.now)
    return CallbackResult(ok=True, output={"ok": True, "proposals": [p.run_id for p in opened],
                                           "archived": [f"{e.name}" for e in retired]},
                          aggregates=[*opened, *retired])
