"""Learning from a finished turn (seeds/004 ch. 5 and 8, seeds/002 ch. 11.1).

For every passing of data from executor A to executor B that the turn
recorded (``Turn.DataPiped``), the mnest keyed by
``(A, ver_A, B, ver_B)`` is reinforced, or created with ``uses`` = the
passings of this turn. A *use* is one step feeding another: a step that
takes two fields of the same earlier step counts once for that pair, since
the mnest records that B consumed A's output, not how many fields it took.

A call to an executor that does not exist whose arguments referenced an
earlier step's output records (or reinforces) a proto-mnest from that step's
executor to the wanted name, with the signature the call suggests. When the
turn offered a chain of existing executors instead (synt compose), the
proto-mnest points at it (``desired_signature["composition"]``): if the gap
recurs, that chain is the candidate for promotion (seeds/000 ch. 7.1).

A new mnest whose proto-mnest exists takes over its uses and weight (the
proto is then superseded by it: "proto -> active when the missing executor
is born"), and a new mnest between the same two executors at other versions
supersedes the older ones.

Nothing is saved here: the aggregates come back with their pending events
for the caller to commit in the turn's last transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from domain import mnest_weight as mw
from domain.mnest import ACTIVE, DECAYING, PROTO, Mnest, mnest_id
from metnos.runtime.mnestome import source as src_mod
from metnos.runtime.mnestome.errors import MnestomeError
from metnos.runtime.mnestome.tags import tags_from_context
from metnos.runtime.mnestome.turn_facts import TurnFacts, read_turn, step_references
from projections.mnestome import select

# A wanted name becomes a proto-mnest only if it could be an executor's name.
_DESIRED = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
MAX_DESIRED_LENGTH = 64


def record_turn(source: Any, turn_events: Iterable[Any], at: datetime, *, state: dict[str, Any] | None = None,
                lambdas: dict[str, float] | None = None) -> list[Mnest]:
    """The Mnest aggregates this turn changes, with their events pending.

    ``source`` is a Runtime (its mnestome view and config are used) or an
    EventLog; ``at`` is the turn's closing time from the recorded clock.
    """
    log = src_mod.log_of(source)
    facts = read_turn(turn_events)
    tags = tags_from_context(facts.text)
    rates = lambdas if lambdas is not None else src_mod.lambdas_of(source)
    lam = mw.lambda_for(tags, rates)
    work = _Work(log, at, facts.turn_id)

    passings = _passings(facts)
    protos = _proto_calls(facts)
    if not passings and not protos:
        return []
    if passings and state is None:
        state = src_mod.mnestome_state(source)

    for (src, sv, dst, dv), uses in sorted(passings.items()):
        work.observe(src, sv, dst, dv, uses, tags, lam, state or {"mnests": {}})
    for (src, sv, desired), (uses, signature) in sorted(protos.items()):
        work.proto(src, sv, desired, uses, tags, lam, signature)
    return work.result()


def _passings(facts: TurnFacts) -> dict[tuple[str, str, str, str], int]:
    pairs: dict[tuple[str, str, str, str], set[tuple[int, int]]] = {}
    for p in facts.piped:
        if not p.src_executor or not p.dst_executor or not p.dst_version:
            continue
        key = (p.src_executor, p.src_version, p.dst_executor, p.dst_version)
        pairs.setdefault(key, set()).add((p.src_step, p.dst_step))
    return {k: len(v) for k, v in pairs.items()}


def _proto_calls(facts: TurnFacts) -> dict[tuple[str, str, str], tuple[int, dict[str, Any]]]:
    found: dict[tuple[str, str, str], tuple[set[tuple[int, int]], list[str]]] = {}
    compositions: dict[tuple[str, str, str], dict[str, Any]] = {}
    for step in facts.unknown:
        desired, args = facts.proposed.get(step, ("", {}))
        if not isinstance(desired, str) or len(desired) > MAX_DESIRED_LENGTH or not _DESIRED.match(desired):
            continue
        for ref_step, field, dst_arg in step_references(args):
            if ref_step >= step or ref_step not in facts.invoked:
                continue
            src, sv = facts.invoked[ref_step]
            pairs, inputs = found.setdefault((src, sv, desired), (set(), []))
            pairs.add((ref_step, step))
            described = f"{dst_arg} <- {src}.{field}"
            if described not in inputs:
                inputs.append(described)
            offered = facts.composed.get(step)
            if offered is not None and offered.get("from_step") == ref_step:
                compositions.setdefault((src, sv, desired), {
                    k: offered[k] for k in ("chain", "versions", "mnests", "weight") if k in offered})
    return {
        key: (len(pairs), desired_signature(key[2], facts.text, inputs, compositions.get(key)))
        for key, (pairs, inputs) in found.items()
    }


def desired_signature(desired: str, request: str, inputs: list[str],
                      composition: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the call tells about the executor it wanted (seeds/004 ch. 8), and the
    composition offered in its place, if any.

    Outputs and errors are unknown at this point; the synt fills them in.
    """
    verb, _, obj = desired.partition("_")
    signature: dict[str, Any] = {
        "name": desired,
        "summary": f"{verb} {obj.replace('_', ' ')}, wanted for: {request.strip()[:160]}",
        "inputs": sorted(inputs),
        "outputs": [],
        "errors": [],
    }
    if composition:
        signature["composition"] = composition
    return signature


class _Work:
    def __init__(self, log: Any, at: datetime, turn_id: str | None) -> None:
        self.log = log
        self.at = at
        self.turn_id = turn_id
        self.touched: dict[Any, Mnest] = {}

    def get(self, mid: Any) -> Mnest | None:
        if mid in self.touched:
            return self.touched[mid]
        found = src_mod.load(self.log, mid)
        if found is not None:
            self.touched[mid] = found
        return found

    def observe(self, src: str, sv: str, dst: str, dv: str, uses: int, tags: list[str], lam: float,
                state: dict[str, Any]) -> None:
        mid = mnest_id(src, sv, dst, dv)
        existing = self.get(mid)
        try:
            if existing is not None:
                existing.reinforce(uses=uses, at=self.at, turn_id=self.turn_id)
                return
            proto = self.get(mnest_id(src, sv, dst, None))
            carried = proto.carry() if proto is not None and proto.state == PROTO else None
            mnest = Mnest.observe(src=src, src_version=sv, dst=dst, dst_version=dv, uses=uses, at=self.at, tags=tags,
                                  decay_lambda=lam, turn_id=self.turn_id, carried=carried)
        except mw.TimeRunsBackwards as e:
            raise MnestomeError(f"mnest {src} -> {dst}: {e}") from None
        self.touched[mid] = mnest
        if carried is not None:
            proto.supersede(at=self.at, by=mid, reason="realised: its executor was born")
        for older in select(state, states=(ACTIVE, DECAYING), src=src, dst=dst):
            if older["key"] == mnest.key:
                continue
            agg = self.get(UUID(older["id"]))
            if agg is not None and agg.state in (ACTIVE, DECAYING):
                agg.supersede(at=self.at, by=mid, reason=f"newer versions {sv} -> {dv}")

    def proto(self, src: str, sv: str, desired: str, uses: int, tags: list[str], lam: float,
              signature: dict[str, Any]) -> None:
        mid = mnest_id(src, sv, desired, None)
        existing = self.get(mid)
        try:
            if existing is not None:
                existing.reinforce(uses=uses, at=self.at, turn_id=self.turn_id)
                return
            self.touched[mid] = Mnest.record_proto(
                src=src, src_version=sv, desired=desired, uses=uses, at=self.at, tags=tags,
                desired_signature=signature, decay_lambda=lam, turn_id=self.turn_id,
            )
        except mw.TimeRunsBackwards as e:
            raise MnestomeError(f"proto-mnest {src} -> {desired}: {e}") from None

    def result(self) -> list[Mnest]:
        return [m for m in self.touched.values() if m.pending_events]
