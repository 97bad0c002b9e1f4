"""The policies a turn's calls are checked against: the guard's (paths a call may name) and the sandbox's scope.

The scheduler's firings and replay check calls as a turn does, so these sit
below the turn session that uses them too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from metnos.mechanisms.sandbox import autonomy
from metnos.mechanisms.sandbox.hints import home_of
from metnos.mechanisms.sandbox.policy import check_args, scope_for
from metnos.runtime.step.vaglio import GuardPolicy
from metnos.settings.workspace import Workspace


class Housed(Protocol):
    """What the policies read of a runtime: where its workspace is (the booted Runtime is one)."""

    workspace: Workspace


def guard_policy(runtime: Housed, env: Mapping[str, str]) -> GuardPolicy:
    ws = runtime.workspace
    return GuardPolicy.core(
        str(home_of(env)), workspace=str(ws.data_dir),
        extra_forbidden=[str(p) for p in ws.forbidden_paths()],
    )


def policy_checker(runtime: Housed, env: Mapping[str, str], level: str = autonomy.DEFAULT) -> Callable[[Any, dict[str, Any]], None]:
    """The sandbox policy check of a call, against the profile the autonomy
    ``level`` derives; an executor's scope is resolved once per turn."""
    scopes: dict[tuple[str, str], Any] = {}

    def check(loaded: Any, args: dict[str, Any]) -> None:
        key = (loaded.name, loaded.digest)
        scope = scopes.get(key)
        if scope is None:
            scope = scopes[key] = scope_for(autonomy.sandbox_profile(level, loaded.profile), workspace=runtime.workspace, env=env)
        check_args(args, loaded.input_schema, scope)

    return check
