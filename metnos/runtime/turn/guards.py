"""Safety caps and the duplicate-read guard (seeds/002 ch. 10).

:class:`TurnGuards` is an immutable value fed step by step:
``decision = guards.check(name, args, vectorial=...)`` before a call, then
``guards = guards.record(step, name, args, executed=..., succeeded=...)``
after it. It holds everything it needs, so a replay that feeds the same
steps gets the same decisions.

Readings where the spec leaves room:

* Every tool call the LLM proposes is a step for ``cap_steps`` (30),
  whether it ran, was refused or was intercepted: the cap exists to stop a
  runaway loop, and a loop of refused calls is still a loop. The check
  runs before the call: the 31st proposal ends the turn with
  ``cap_steps``.
* ``cap_same_executor`` (10; 2 for vectorial executors) counts calls that
  actually ran. The call that would exceed it ends the turn with
  ``cap_same_executor``.
* The duplicate-read guard covers read_files, write_files and get_urls by
  default (the spec's list), comparing their path/url targets: a call is
  intercepted when *every* target it names was already handled by an
  earlier successful call of the same executor. A call that adds a new
  target runs, so "read a.txt" then "read a.txt and b.txt" is not
  blocked. Paths are compared after lexical normalisation (``a/./b`` is
  ``a/b``), URLs after trimming a trailing slash. The intercepted call gets
  an observation naming the steps that already hold the data.
* scratchpad_read is never guarded (re-reading with another range is its
  normal use) and, like every builtin, does count towards the caps.
* Beyond the targets, an executor without side effects (``pure``, given by
  the loop from the catalogue) called again with the very arguments of an
  earlier successful call is a duplicate too: its data is there. The 1.5B
  listed the same folder with the same arguments six times before acting.
* An executor with side effects called again with the very arguments of an
  earlier successful call is a repeated action: what it does is done, and
  doing it again would do it twice (the 1.5B made the same weekly reminder
  ten times in one turn). The call is intercepted and the turn asked for
  words.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from domain.canonical import canonical_hash
from metnos.settings.turn import DEFAULT_CAP_SAME_EXECUTOR, DEFAULT_CAP_SAME_VECTORIAL, DEFAULT_CAP_STEPS

# executor -> argument names that carry its targets
DUPLICATE_GUARDED: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "read_files": ("path", "paths"),
    "write_files": ("path", "paths"),
    "get_urls": ("url", "urls"),
})
NEVER_GUARDED = frozenset({"scratchpad_read"})

ALLOW = "allow"
CAP_STEPS = "cap_steps"
CAP_SAME_EXECUTOR = "cap_same_executor"
DUPLICATE_READ = "duplicate_read"
REPEATED_ACTION = "repeated_action"


@dataclass(frozen=True, slots=True)
class GuardDecision:
    outcome: str  # allow | cap_steps | cap_same_executor | duplicate_read | repeated_action
    message: str = ""
    previous_steps: tuple[int, ...] = ()
    ends_turn: bool = False

    @property
    def allowed(self) -> bool:
        return self.outcome == ALLOW

    def observation(self, *, done_is_ok: bool = True) -> dict[str, Any]:
        """What the LLM sees instead of running an intercepted call. A repeated action is no error
        to report: the work is done (told "error", the 1.5B answered that it "could not be done";
        told ``ok: false``, that it "was not able to perform the action"). ``done_is_ok`` False: as
        turns recorded before it were told."""
        if self.outcome == REPEATED_ACTION and done_is_ok:
            # Said without a negation: told "not run a second time", the 1.5B answered that the steps
            # "could not be run", and the turn read that as not done.
            done = self.previous_steps[-1]
            return {"ok": True, "done_at_step": done,
                    "note": f"done at step {done}, where this very call ran and succeeded: answer the user with what step {done} did"}
        if self.outcome == REPEATED_ACTION:
            return {"ok": False, "error_class": self.outcome, "done_at_step": self.previous_steps[-1], "note": self.message}
        return {"ok": False, "error_class": self.outcome, "error": self.message,
                "previous_steps": list(self.previous_steps)}

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "message": self.message,
                "previous_steps": list(self.previous_steps), "ends_turn": self.ends_turn}


def _norm_target(arg: str, value: str) -> str:
    value = value.strip()
    if arg.startswith("url"):
        return value[:-1] if value.endswith("/") and not value.endswith("//") else value
    return posixpath.normpath(value) if value else value


def targets_of(name: str, args: Mapping[str, Any],
               guarded: Mapping[str, tuple[str, ...]] = DUPLICATE_GUARDED) -> frozenset[str]:
    found: set[str] = set()
    for arg in guarded.get(name, ()):
        value = args.get(arg)
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, str) and v.strip():
                found.add(_norm_target(arg, v))
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class TurnGuards:
    cap_steps: int = DEFAULT_CAP_STEPS
    cap_same_executor: int = DEFAULT_CAP_SAME_EXECUTOR
    cap_same_vectorial: int = DEFAULT_CAP_SAME_VECTORIAL
    guarded: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: DUPLICATE_GUARDED)
    steps: int = 0
    calls: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # (executor, target) -> first step that handled it
    seen: Mapping[tuple[str, str], int] = field(default_factory=lambda: MappingProxyType({}))
    # executors without side effects, and (executor, hash of its arguments) -> the first step that ran it so
    # (an action's too: a repeated action is intercepted like a duplicate read)
    pure: frozenset[str] = frozenset()
    same: Mapping[tuple[str, str], int] = field(default_factory=lambda: MappingProxyType({}))

    def check(self, name: str, args: Mapping[str, Any], *, vectorial: bool = False) -> GuardDecision:
        if self.steps >= self.cap_steps:
            return GuardDecision(CAP_STEPS, f"step limit reached ({self.cap_steps} steps in this turn)",
                                 ends_turn=True)
        if name in self.guarded and name not in NEVER_GUARDED:
            targets = targets_of(name, args, self.guarded)
            if targets and all((name, t) in self.seen for t in targets):
                where = tuple(sorted({self.seen[(name, t)] for t in targets}))
                steps = ", ".join(map(str, where))
                return GuardDecision(
                    DUPLICATE_READ,
                    f"you already have this data at step {steps}: answer from it, or pass it to the tool "
                    f'that works on it with "from_step": {where[-1]}, instead of calling {name} again',
                    where)
        earlier = self.same.get((name, canonical_hash(dict(args)))) if name not in NEVER_GUARDED else None
        if earlier is not None and name in self.pure:
            return GuardDecision(
                DUPLICATE_READ,
                f"step {earlier} already ran this very call: answer from its data, or pass it to the tool "
                f'that works on it with "from_step": {earlier}, instead of calling {name} again',
                (earlier,))
        if earlier is not None:
            return GuardDecision(
                REPEATED_ACTION,
                f"not run a second time: step {earlier} already made this very call, and it succeeded. The work "
                f"is done: answer the user with what step {earlier} did",
                (earlier,))
        cap = self.cap_same_vectorial if vectorial else self.cap_same_executor
        if self.calls.get(name, 0) >= cap:
            return GuardDecision(CAP_SAME_EXECUTOR,
                                 f"{name} was already called {cap} times in this turn (limit {cap})",
                                 ends_turn=True)
        return GuardDecision(ALLOW)

    def record(self, step: int, name: str, args: Mapping[str, Any], *, executed: bool,
               succeeded: bool, proposed: Mapping[str, Any] | None = None) -> TurnGuards:
        """The guards after step ``step`` (1-based) proposed ``name(args)``.
        ``executed``: the executor actually ran; ``succeeded``: it returned ok.
        ``proposed``: the arguments as the model wrote them, when ``args`` are
        those resolved from them: a repeated call is met as proposed
        (``"from_step": 1``), since :meth:`check` sees it before resolution."""
        calls = dict(self.calls)
        seen = dict(self.seen)
        same = dict(self.same)
        if executed:
            calls[name] = calls.get(name, 0) + 1
            if succeeded and name in self.guarded and name not in NEVER_GUARDED:
                for t in targets_of(name, args, self.guarded):
                    seen.setdefault((name, t), step)
            if succeeded:
                same.setdefault((name, canonical_hash(dict(args if proposed is None else proposed))), step)
        return dataclasses.replace(self, steps=self.steps + 1, calls=MappingProxyType(calls),
                                   seen=MappingProxyType(seen), same=MappingProxyType(same))

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "calls": dict(sorted(self.calls.items())),
                "cap_steps": self.cap_steps, "cap_same_executor": self.cap_same_executor,
                "cap_same_vectorial": self.cap_same_vectorial}
